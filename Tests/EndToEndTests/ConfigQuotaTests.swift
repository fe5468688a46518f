#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing

/// Found by review (a stolen phone key): one device's offers filled the store's single 2,048-key cap (records and
/// every device's pending changes) so another device's offer got `too-large`, and its newer version of a key
/// replaced the change another device had offered for that key. Two raw paired peers against the real daemon.
@Suite("End to end: pending config per device", .serialized)
struct ConfigQuotaTests {
    func offer(_ batch: String, _ entries: [JSONValue]) -> [(String, JSONValue)] {
        [("batch", .string(batch)), ("part", .integer(1)), ("parts", .integer(1)), ("entries", .array(entries))]
    }

    func entry(_ key: String, _ version: String, _ value: String) -> JSONValue {
        .object([("key", .string(key)), ("version", .string(version)), ("value", .string(value))])
    }

    @Test("a device past its pending quota gets too-large; another device's offer is still held, and not replaceable")
    func quotaAndNoReplacement() throws {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        defer { pair.stop() }
        let thief = try RawConfigSession(try RawPeer.paired(with: pair, name: "thief"), port: pair.port)
        defer { thief.close() }
        let tablet = try RawConfigSession(try RawPeer.paired(with: pair, name: "tablet"), port: pair.port)
        defer { tablet.close() }

        // The thief fills its quota (256 changes), in one batch of 256 entries.
        let v = thief.version()
        let filler = String(repeating: "f", count: 100)
        let result = try thief.exchange("config-offer", offer("t1", (0..<256).map { entry("spam.k\($0)", v, filler) }))
        #expect(result.type == "config-result" && result.body["status"]?.stringValue == "pending", "\(result)")
        // One more change: refused whole.
        let over = try thief.exchange("config-offer", offer("t2", [entry("spam.more", v, filler)]))
        #expect(over.type == "config-error" && over.body["code"]?.stringValue == "too-large", "\(over)")

        // The tablet's offer is held for consent whatever the thief did.
        let mine = try tablet.exchange("config-offer", offer("m1", [entry("transcription.locale", tablet.version(), "de-CH")]))
        #expect(mine.type == "config-result" && mine.body["status"]?.stringValue == "pending", "\(mine)")
        // A newer version of that key from the thief waits beside it (its own quota is full: it is refused).
        let newer = try thief.exchange("config-offer", offer("t3", [entry("transcription.locale", thief.version(), "xx-EVIL")]))
        #expect(newer.type == "config-error", "\(newer)")
        #expect(try run(["config", "reject", "spam.k0"], home: pair.desktopHome).status == 0)
        let replace = try thief.exchange("config-offer", offer("t4", [entry("transcription.locale", thief.version(), "xx-EVIL")]))
        #expect(replace.type == "config-result" && replace.body["status"]?.stringValue == "pending", "\(replace)")

        let pending = try run(["config", "pending", "--json"], home: pair.desktopHome)
        let list = try #require(try JSONValue.parse(Array(pending.stdout.utf8), maxDepth: 8, maxBytes: 1 << 24).arrayValue)
        let locale = list.filter { $0["key"]?.stringValue == "transcription.locale" }
        #expect(locale.count == 2, "both devices' changes of the key wait: \(locale)")
        #expect(locale.contains { $0["from"]?.stringValue == tablet.device.description && $0["incoming"]?.stringValue == "\"de-CH\"" })
        #expect(list.count == 257, "255 of the thief's spam, its locale and the tablet's")
    }
}

/// A paired raw peer's session, driven by the test.
final class RawConfigSession {
    let link: RawLink
    var machine: InitiatorMachine
    let device: DeviceID

    init(_ peer: RawPeer, port: Int) throws {
        // The first transport message must follow message 2 at once: a pull of a key nobody has.
        let hello = Message.config(type: "config-pull", body: .object([("batch", .string("hello")),
                                                                      ("keys", .array([.string("none.none")]))]))
        (link, machine) = try peer.session(port: port, sending: [hello])
        device = KeySchedule.deviceID(of: peer.key.publicKey)
        _ = try receive()
    }

    func version() -> String {
        // Strictly increasing per session, so each offer of a key is newer than the last.
        let ms = max(Int64(Date().timeIntervalSince1970 * 1_000), last + 1)
        last = ms
        return "\(ms):0:\(device.compact)"
    }
    private var last: Int64 = 0

    func send(_ type: String, _ body: [(String, JSONValue)]) {
        for frame in RawPeer.frames(machine.encryptAndSend(.config(type: type, body: .object(body)))) { link.send(frame) }
    }

    func receive(timeout: Double = 30) throws -> (type: String, body: JSONValue) {
        while true {
            for action in machine.receive(try link.next(timeout: timeout)) {
                if case .received(.config(let type, let body)) = action { return (type, body) }
            }
        }
    }

    func exchange(_ type: String, _ body: [(String, JSONValue)]) throws -> (type: String, body: JSONValue) {
        send(type, body)
        return try receive()
    }

    func close() { link.close() }
}
