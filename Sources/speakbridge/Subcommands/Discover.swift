import ArgumentParser
import FoundationEssentials
import SpeakBridgeDiscovery
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Discover: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List SpeakBridge desktops on the LAN (mDNS): name, ID, addresses, port, and whether this installation is paired with it.")

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Print JSON.") var json = false

    @Option(name: .long, help: ArgumentHelp(
        "Seconds to listen at most.",
        discussion: "discover returns earlier once every desktop this installation is paired with has answered; "
            + "paired with none, once avahi's list is complete for now (its first answers are in, about 1 s) "
            + "and resolved."))
    var timeout: Double = 3

    func run() throws {
        let paired = Set(((try? PeerStore(home: homeOptions.resolved))?.all ?? []).filter { $0.role == .desktop }.map(\.id))
        let known = Set(paired.map(\.description))
        let services: [DiscoveredService]
        let started = ContinuousClock.now
        do {
            services = try MDNSBrowser.browse(timeout: .milliseconds(Int(min(3_600, max(0.1, timeout)) * 1000)),
                                              untilList: { found in
                DiscoveryStopRule.everyKnownAnswered(found, known: known) { s in
                    s.txt["id"].flatMap { try? DeviceID(parsing: $0) }?.description
                }
            }, orComplete: known.isEmpty)
        } catch let error as DiscoveryError {
            throw CLIError(error.description, hint: error.hint)
        }
        let rows: [JSONValue] = services.map { s in
            let id = s.txt["id"].flatMap { try? DeviceID(parsing: $0) }
            return .object([
                ("name", .string(s.name)),
                ("id", id.map { .string($0.description) } ?? .null),
                ("version", s.txt["v"].map { .string($0) } ?? .null),
                ("addresses", .array(s.addresses.map { .string($0) })),
                ("port", .integer(Int64(s.port))),
                ("paired", .bool(id.map { paired.contains($0) } ?? false)),
                ("local", .bool(s.isLocal)),
            ])
        }
        if json {
            Console.out(String(decoding: JSONValue.array(rows).encoded(), as: UTF8.self))
            return
        }
        if rows.isEmpty {
            let waited = (ContinuousClock.now - started).components
            let seconds = Double(waited.seconds) + Double(waited.attoseconds) / 1e18
            Console.info("no SpeakBridge desktop answered (listened \((seconds * 10).rounded() / 10) s)")
            return
        }
        for r in rows {
            let addrs = r["addresses"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? ""
            // Service names come from anyone on the LAN (mDNS is unauthenticated): one escaped line each.
            Console.out(PeerText.escape("\"\(r["name"]?.stringValue ?? "")\"  \(r["id"]?.stringValue ?? "(no id)")  \(addrs) port \(r["port"]?.int64Value ?? 0)\(r["paired"]?.boolValue == true ? "  paired" : "")"))
        }
    }
}
