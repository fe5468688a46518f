import ArgumentParser
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// What the shell completion scripts (`--generate-completion-script bash|zsh|fish`) offer for values that are not
/// files: sink specs and paired devices. The scripts call back into the binary for the `.custom` ones.
enum Completions {
    /// Every sink spec `serve --sink` accepts; `fifo:`, `jsonl:` and `transcript:` are followed by a path.
    static let sinks: CompletionKind = .list([
        "stdout", "fifo:", "jsonl:", "transcript:", "clipboard", "clipboard:primary", "type", "type:enter",
    ])

    /// Paired devices of the home on the command line (`--home DIR`, else SPEAKBRIDGE_HOME / the XDG
    /// directories): their IDs and their names. Read from the home's pairings file, never from the network;
    /// nothing is offered when the home cannot be read.
    static let devices: CompletionKind = .custom { words, _, prefix in
        deviceCandidates(words: words, prefix: prefix)
    }

    static func deviceCandidates(words: [String], prefix: String) -> [String] {
        guard let peers = try? PeerStore(home: Home.resolve(override: homeOverride(in: words))) else { return [] }
        var candidates: [String] = []
        for peer in peers.all {
            candidates.append(peer.id.description)
            // A peer chose its name: offered only when the shell takes it as one plain word. bash's `compgen -W`
            // expands each candidate (`$(…)` and backticks run), and a completion is inserted unquoted, so a name
            // such as `$(curl …|sh)` — which a hostile desktop can give itself at pairing, or a phone on the
            // desktop — ran as a command at the next TAB. Any other name is reached by its ID.
            if isShellWord(peer.name) { candidates.append(peer.name) }
        }
        return candidates.filter { $0.hasPrefix(prefix) }
    }

    /// Letters and digits (any script), `. _ - + , @ :` and single inner spaces, not starting with `-` (an option)
    /// and at most 64 scalars: nothing `compgen -W` expands or removes (`$`, backticks, quotes, backslashes,
    /// braces, a leading `~`), and no control, format or bidi character. A space is safe: the scripts split the
    /// candidates at newlines only, and bash quotes it when it inserts the word (`complete -o filenames`).
    static func isShellWord(_ name: String) -> Bool {
        let scalars = name.unicodeScalars
        guard let first = scalars.first, let last = scalars.last, first != "-", first != " ", last != " ",
              scalars.count <= 64, !name.contains("  ") else { return false }
        return scalars.allSatisfy { scalar in
            switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                 .decimalNumber, .nonspacingMark, .spacingMark:
                return true
            default:
                return ".-_+,@: ".unicodeScalars.contains(scalar)
            }
        }
    }

    /// The value of `--home DIR` or `--home=DIR` among the shell words, unquoted as far as a plain path needs.
    static func homeOverride(in words: [String]) -> String? {
        for (index, word) in words.enumerated() {
            if word == "--home", index + 1 < words.count { return unquote(words[index + 1]) }
            if word.hasPrefix("--home=") { return unquote(String(word.dropFirst("--home=".count))) }
        }
        return nil
    }

    private static func unquote(_ word: String) -> String {
        var text = word
        if text.count >= 2, let first = text.first, first == "\"" || first == "'", text.last == first {
            text = String(text.dropFirst().dropLast())
        }
        if text.hasPrefix("~/") { text = (ProcessInfo.processInfo.environment["HOME"] ?? "") + text.dropFirst() }
        return text
    }
}
