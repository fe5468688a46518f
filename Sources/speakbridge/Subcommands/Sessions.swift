import ArgumentParser
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

/// `speakbridge sessions [--json]`: the transcripts written by `serve --sink transcript:DIR` with the same home,
/// newest first. The daemon records its transcript directories in the state directory (`TranscriptRegistry`);
/// each transcript is read from its `NAME.jsonl` (`TranscriptDirectory.scan`), so this works with or without a
/// running daemon.
struct Sessions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List transcripts (serve --sink transcript:DIR), newest first: device, session, lines, file.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print JSON: a list of objects with path, jsonl, vtt, device, name, session, lines, started.")
    var json = false

    func run() throws {
        let home = homeOptions.resolved
        let directories: [String]
        do { directories = try TranscriptRegistry.directories(stateDirectory: home.state) } catch { throw CLIError(error) }
        var entries: [TranscriptEntry] = []
        for directory in directories {
            do {
                entries += try TranscriptDirectory.scan(directory)
            } catch {
                // A directory removed since: say so, list the others.
                Console.warning("\(error.message)")
            }
        }
        entries.sort { ($0.name, $0.directory) > ($1.name, $1.directory) }
        if json {
            Console.out(String(decoding: JSONValue.array(entries.map(Self.json)).encoded(), as: UTF8.self))
            return
        }
        if entries.isEmpty {
            Console.info(directories.isEmpty
                ? "no transcripts: start the desktop with `speakbridge serve --sink transcript:DIR`"
                : "no transcripts yet in \(directories.joined(separator: ", "))")
            return
        }
        for entry in entries {
            let who = entry.deviceName.map { "\"\($0)\" (\(entry.device))" } ?? "\(entry.device)"
            let line = "\(entry.started ?? "?")  \(who)  session \(entry.session)  \(entry.lines) line"
                + (entry.lines == 1 ? "" : "s") + "  \(entry.markdownPath)"
            // Device names and session IDs come from peers: one escaped line each.
            Console.out(PeerText.escape(line))
        }
    }

    static func json(_ entry: TranscriptEntry) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("path", .string(entry.markdownPath)), ("jsonl", .string(entry.jsonlPath)),
        ]
        if FileManager.default.fileExists(atPath: entry.vttPath) { members.append(("vtt", .string(entry.vttPath))) }
        members += [("device", .string(entry.device.description))]
        if let name = entry.deviceName { members.append(("name", .string(name))) }
        members += [("session", .string(entry.session)), ("lines", .integer(Int64(entry.lines))),
                    ("lastSeq", .integer(Int64(clamping: entry.lastSeq)))]
        if let started = entry.started { members.append(("started", .string(started))) }
        return .object(members)
    }
}
