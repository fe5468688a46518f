#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// `speakbridge outbox`: what `send` has queued for each desktop, and what was held back from an earlier pairing.
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "List lines queued for a desktop (not yet acknowledged), release held ones, or drop them.",
        discussion: """
        `send` journals every line before sending it; lines the desktop has not acknowledged wait here and go \
        out with the next `send`. After pairing again with a desktop (`join`), lines queued under the earlier \
        pairing are held: never sent unless you run `outbox release` (they then go out after what is already \
        queued), or dropped with `outbox clear`.
        """,
        subcommands: [List.self, Release.self, Clear.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List queued and held lines per desktop.")
        @OptionGroup var homeOptions: HomeOptions
        @Flag(name: .long, help: "Print JSON.") var json = false

        func run() throws {
            let home = homeOptions.resolved
            let entries: [OutboxShelf.Entry]
            do { entries = try OutboxShelf.list(home: home) } catch { throw CLIError(error) }
            let names = desktopNames(home)
            if json {
                let items: [JSONValue] = entries.map { e in
                    var m: [(String, JSONValue)] = [("desktop", .string(displayID(e.desktop))),
                                                    ("name", .string(names[e.desktop] ?? "")),
                                                    ("held", .bool(e.held)), ("count", .integer(Int64(e.count)))]
                    if let s = e.session { m.append(("session", .string(s))) }
                    if let since = e.heldSince { m.append(("heldSince", .integer(Int64(since.timeIntervalSince1970)))) }
                    if let oldest = e.oldest { m.append(("oldest", .string(PeerText.escape(oldest, limit: 60)))) }
                    return .object(m)
                }
                Console.out(String(decoding: JSONValue.array(items).encoded(), as: UTF8.self))
                return
            }
            if entries.isEmpty {
                Console.info("the outbox is empty: every line sent was acknowledged")
                return
            }
            let formatter = Date.ISO8601FormatStyle()
            for e in entries {
                let who = "\"\(names[e.desktop] ?? "unknown desktop")\" (\(displayID(e.desktop)))"
                let oldest = e.oldest.map { ", oldest \"\(PeerText.escape($0, limit: 40))\"" } ?? ""
                let line = e.held
                    ? "\(who): \(e.count) line(s) held from an earlier pairing (since "
                        + "\(formatter.format(e.heldSince ?? Date(timeIntervalSince1970: 0))))\(oldest)"
                    : "\(who): \(e.count) line(s) queued, session \(e.session ?? "?")\(oldest)"
                // The queued text is shown cut and escaped: one line each, no control reaches the terminal.
                Console.out(PeerText.escape(line.count > 200 ? String(line.prefix(200)) + "…" : line))
            }
            if entries.contains(where: \.held) {
                Console.info("hint: held lines are not sent: `speakbridge outbox release` sends them, "
                             + "`speakbridge outbox clear --held` drops them")
            }
        }
    }

    struct Release: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "release",
            abstract: "Queue the lines held from an earlier pairing again: the next `send` delivers them.")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Which desktop (name, ID or ID prefix); default: every desktop with held lines.")
        var desktop: String?

        func run() throws {
            let home = homeOptions.resolved
            do {
                let targets = try desktop.map { [try resolveDesktop(home, $0)] } ?? OutboxShelf.heldDesktops(home: home)
                var total = 0
                for compact in targets {
                    guard let id = try? DeviceID(parsing: compact) else { continue }
                    total += try OutboxShelf.release(home: home, desktop: id) {
                        Console.info("a `speakbridge send` to this desktop is running; waiting for it to finish")
                    }
                }
                guard total > 0 else {
                    Console.info("no held lines to release")
                    return
                }
                Console.info("\(total) held line(s) queued again; they go out with the next `speakbridge send` "
                             + "(`speakbridge send </dev/null` sends just them)")
            } catch let error as StoreError {
                throw CLIError(error)
            }
        }
    }

    struct Clear: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear",
            abstract: "Drop queued lines (asks first on a terminal).")
        @OptionGroup var homeOptions: HomeOptions
        @Argument(help: "Which desktop (name, ID or ID prefix); default: every desktop.") var desktop: String?
        @Flag(name: .long, help: "Drop only the lines held from an earlier pairing.") var held = false
        @Flag(name: .shortAndLong, help: "Do not ask (needed when stdin is not a terminal).") var yes = false

        func run() throws {
            let home = homeOptions.resolved
            do {
                let target = try desktop.map { try resolveDesktop(home, $0) }
                let entries = try OutboxShelf.list(home: home)
                    .filter { (target == nil || $0.desktop == target) && ($0.held || !held) }
                guard !entries.isEmpty else {
                    Console.info("nothing to drop")
                    return
                }
                let count = entries.reduce(0) { $0 + $1.count }
                let names = desktopNames(home)
                let whom = Set(entries.map(\.desktop)).sorted()
                    .map { "\"\(names[$0] ?? "unknown desktop")\" (\(displayID($0)))" }.joined(separator: ", ")
                if !yes {
                    guard isatty(STDIN_FILENO) == 1 else {
                        throw CLIError("refusing to drop \(count) queued line(s) without confirmation",
                                       hint: "stdin is not a terminal, so `outbox clear` cannot ask: add --yes")
                    }
                    Console.raw(PeerText.escape("speakbridge: drop \(count) line(s) queued for \(whom)? [y/N] "))
                    let answer = TextTrim.whitespace(readLine() ?? "").lowercased()
                    guard answer == "y" || answer == "yes" else {
                        Console.info("nothing dropped")
                        return
                    }
                }
                var dropped = 0
                for compact in Set(entries.map(\.desktop)).sorted() {
                    do {
                        dropped += try OutboxShelf.clear(home: home, desktop: compact, heldOnly: held)
                    } catch {
                        // The lines of the desktops cleared before this one are gone too: say so.
                        let before = dropped > 0
                            ? " (\(dropped) line(s) queued for other desktops were dropped before)" : ""
                        throw CLIError(error.message + before, hint: error.hint)
                    }
                }
                Console.info("dropped \(dropped) line(s) queued for \(whom)")
            } catch let error as StoreError {
                throw CLIError(error)
            }
        }
    }
}

/// Paired devices' names by compact ID (desktops that were forgotten have none).
private func desktopNames(_ home: Home) -> [String: String] {
    guard let peers = try? PeerStore(home: home) else { return [:] }
    return Dictionary(peers.all.map { ($0.id.compact, $0.name) }, uniquingKeysWith: { a, _ in a })
}

/// `XXXX-XXXX-XXXX-XXXX` for a compact ID (as the other commands show IDs).
private func displayID(_ compact: String) -> String {
    (try? DeviceID(parsing: compact))?.description ?? compact
}

/// The compact ID of the desktop `query` names: a paired desktop (name, ID, ID prefix), or the ID (prefix) of a
/// desktop that has an outbox but is no longer paired. Ambiguous names list the matches.
private func resolveDesktop(_ home: Home, _ query: String) throws -> String {
    if let peers = try? PeerStore(home: home) {
        let matches = peers.matches(query)
        if matches.count == 1 { return matches[0].id.compact }
        if matches.count > 1 {
            listMatches(matches.map(deviceJSON))
            throw ambiguousDevices(query, matches, usage: "speakbridge outbox … ID")
        }
    }
    let compact = query.uppercased().replacing("-", with: "")
    let known = Set(((try? OutboxShelf.list(home: home)) ?? []).map(\.desktop)).filter { !compact.isEmpty && $0.hasPrefix(compact) }
    guard known.count == 1, let only = known.first else {
        throw CLIError("no desktop with queued lines matches \"\(PeerText.escape(query, limit: 64))\"",
                       hint: "`speakbridge outbox` lists them")
    }
    return only
}
