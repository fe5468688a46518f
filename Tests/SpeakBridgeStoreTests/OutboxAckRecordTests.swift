#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// The journal's ack record, written directly (`Outbox.ackLine`), and the pending ack riding in the next line's
/// write(2) (`append(…, ack:)`): the journal must read back exactly as with the generic encoding and a write of its own.
@Suite("Outbox: ack records written directly, riding with the next line")
struct OutboxAckRecordTests: JournalFixture {
    let root = "/tmp/sb-outbox-ack-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func journal() -> String { String(decoding: ((try? LogFile.readRecords(path)) ?? nil) ?? [], as: UTF8.self) }

    @Test("byte for byte the JSONValue encoding, for every digit count up to Int64.max")
    func ackLineMatchesJSONValue() {
        var values: [UInt64] = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 65535, 65536, 4_294_967_295, 4_294_967_296,
                                UInt64(Int64.max) - 1, UInt64(Int64.max)]
        var p: UInt64 = 1
        for _ in 0..<18 {
            p *= 10
            values += [p - 1, p, p + 1]
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 { values.append(UInt64.random(in: 0...UInt64(Int64.max), using: &rng) >> UInt64.random(in: 0...62)) }
        for n in values {
            var direct: [UInt8] = []
            Outbox.ackLine(n, into: &direct)
            let generic = JSONValue.object([("a", .integer(Int64(n)))]).encoded() + [0x0A]
            #expect(direct == generic, "ack \(n)")
            #expect(direct.count <= Outbox.ackRecordCapacity)
        }
        // Above Int64.max (the generic encoding could not hold it): written in full, and still bounded.
        var top: [UInt8] = []
        Outbox.ackLine(UInt64.max, into: &top)
        #expect(top == Array(#"{"a":18446744073709551615}"#.utf8) + [0x0A])
        #expect(top.count == Outbox.ackRecordCapacity)
    }

    @Test("markAcked writes the same record as before and load reads it")
    func markAckedRoundTrip() throws {
        defer { cleanup() }
        do {
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["one", "two", "three"])
            try outbox.markAcked(2)
            #expect(journal().hasSuffix("{\"a\":2}\n"))
        }
        let again = try Outbox(home: home, desktop: device)
        #expect(again.acked == 2)
        #expect(again.pending.map(\.text) == ["three"])
    }

    @Test("the pending ack rides in the next line's write: one record more, read back the same")
    func ackRidesWithNextLine() throws {
        defer { cleanup() }
        do {
            let outbox = try Outbox(home: home, desktop: device)
            let first = try outbox.append(text: "one")
            let before = journal()
            let second = try outbox.append(text: "two", ack: first.seq)
            #expect(outbox.acked == first.seq)
            let added = String(journal().dropFirst(before.count))
            #expect(added.hasPrefix("{\"a\":\(first.seq)}\n{\"c\":"))
            #expect(second.encoded.map { String(decoding: $0, as: UTF8.self) }.map { added.contains($0) } ?? false)
            // An ack not above `acked` adds no record.
            let mid = journal()
            _ = try outbox.append(text: "three", ack: first.seq)
            #expect(!String(journal().dropFirst(mid.count)).contains("\"a\""))
            // The batch path too.
            let more = try outbox.append(texts: ["four", "five"], ack: second.seq)
            #expect(outbox.acked == second.seq)
            #expect(more.map(\.seq) == [first.seq + 3, first.seq + 4])
        }
        let again = try Outbox(home: home, desktop: device)
        #expect(again.acked == 2)
        #expect(again.pending.map(\.text) == ["three", "four", "five"])
    }

    @Test("killed mid-write: the ack record whole, the line torn — the ack counts, the torn line is skipped")
    func tornAfterRiddenAck() throws {
        defer { cleanup() }
        do {
            let outbox = try Outbox(home: home, desktop: device)
            _ = try outbox.append(texts: ["one", "two"])
        }
        // What a kill between the two records of one write leaves: the ack whole, the next chunk cut short.
        let fd = open(path, O_WRONLY | O_APPEND)
        #expect(fd >= 0)
        try FileIO.writeAll(fd, Array("{\"a\":1}\n{\"c\":{\"seq\":3,\"te".utf8), path: path)
        close(fd)
        let again = try Outbox(home: home, desktop: device)
        #expect(again.acked == 1)
        #expect(again.pending.map(\.text) == ["two"])
        #expect(again.nextSeq == 3)
    }
}
