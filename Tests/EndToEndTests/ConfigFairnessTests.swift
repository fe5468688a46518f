#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Found by review: the daemon ran every device's config calls in one FIFO (`sb-config`), so a device with pulls
/// in flight on its eight connections delayed another device's pull by 12-17 s. Calls are now served round robin
/// per device. Two raw paired peers against the real daemon, with a store large enough that a call takes a while.
@Suite("End to end: config calls served fairly per device", .serialized)
struct ConfigFairnessTests {
    /// `count` keys of 3 KB in the desktop's settings.json (the documented format): every config call parses it.
    func writeBigStore(_ home: String, count: Int) throws {
        let id = try Identity.loadOrCreate(Home.resolve(override: home)).deviceID.compact
        let ms = Int64(Date().timeIntervalSince1970 * 1_000) - 60_000
        let filler = String(repeating: "v", count: 3_000)
        let entries: [JSONValue] = (0..<count).map { i in
            .object([("key", .string("bulk.k\(i)")), ("version", .string("\(ms):0:\(id)")), ("value", .string(filler))])
        }
        let doc = JSONValue.object([("version", .integer(1)), ("clock", .object([("ms", .integer(ms)), ("counter", .integer(0))])),
                                    ("entries", .array(entries))])
        try FileIO.atomicWrite(home + "/config/settings.json", doc.encoded())
    }

    func pull(_ batch: String) -> [(String, JSONValue)] {
        [("batch", .string(batch)), ("keys", .array([.string("none.none")]))]
    }

    @Test("a device with 32 pulls queued on 8 connections: another device's pull is answered after a few of them, not all 32")
    func pullsOfOneDeviceDoNotHoldAnother() throws {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        defer { pair.stop() }
        let thiefPeer = try RawPeer.paired(with: pair, name: "thief")
        let tabletPeer = try RawPeer.paired(with: pair, name: "tablet")
        try writeBigStore(pair.desktopHome, count: 1_500)

        // One call alone (the session's first pull, answered before anything else is queued).
        var start = Date()
        var thief = [try RawConfigSession(thiefPeer, port: pair.port)]
        let single = Date().timeIntervalSince(start)
        for _ in 1..<8 { thief.append(try RawConfigSession(thiefPeer, port: pair.port)) }
        defer { thief.forEach { $0.close() } }
        // Four pulls on each of its eight connections (the desktop reads four per connection before it pauses it).
        for (c, session) in thief.enumerated() {
            for i in 0..<4 { session.send("config-pull", pull("t\(c)-\(i)")) }
        }
        usleep(200_000)  // let the daemon read and queue them
        start = Date()
        let tablet = try RawConfigSession(tabletPeer, port: pair.port)
        defer { tablet.close() }
        let waited = Date().timeIntervalSince(start)
        // How many of the thief's 32 pulls were answered before the tablet's (each answer is one frame, read into
        // its link's inbox by the link's own thread as it arrives): the order, not the clock, is what is asserted.
        let answeredBefore = thief.map { session in session.link.lock.withLock { session.link.inbox.count } }.reduce(0, +)
        print("one config call alone: \(single) s; the tablet's pull behind 32 of the thief's: \(waited) s, "
              + "\(answeredBefore) of them answered before it")
        // Round robin: the call running, one of the thief's, then the tablet's (about 2; all 32 in one FIFO).
        #expect(answeredBefore <= 8, "\(answeredBefore) of the thief's 32 pulls were answered before the tablet's")
    }
}
