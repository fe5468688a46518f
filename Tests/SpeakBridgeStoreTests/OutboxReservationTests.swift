#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeStore

/// `Outbox` reservations: acknowledged chunk records are not fsynced (Sender+Clock.swift), so a crash of the machine
/// can take the journal's last records; no sequence number may then be given twice. Numbers are reserved ahead,
/// durably, and after a reboot numbering goes on past the last reservation. A crash is stood in for by cutting the
/// journal's records (what a lost page leaves) and a reboot by another boot ID (this machine cannot be rebooted).
@Suite("Outbox: sequence numbers reserved ahead, durably")
struct OutboxReservationTests: JournalFixture {
    let root = "/tmp/sb-outbox-reserve-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    func records() -> [String] {
        ((try? LogFile.readRecords(path)) ?? nil).map { LogFile.lines($0).map { String(decoding: $0, as: UTF8.self) } } ?? []
    }

    @Test("the first chunk of a boot writes a reservation, fsynced; later chunks within it write none")
    func firstChunkReserves() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device, boot: "boot-a")
        let syncs = outbox.log.syncCounts
        _ = try outbox.append(text: "one")
        #expect(outbox.reserved == 1 + Outbox.reservationStep)
        let after = outbox.log.syncCounts
        #expect(after.full + after.data == syncs.full + syncs.data + 1, "the reservation is fsynced before the chunk")
        _ = try outbox.append(texts: ["two", "three"])
        #expect(outbox.log.syncCounts == after, "no fsync while the reservation covers the chunks")
        let lines = records()
        #expect(lines.filter { $0.hasPrefix(#"{"r":"#) } == [#"{"r":65537,"b":"boot-a"}"#])
        // The reservation comes before the chunk it covers.
        let r = try #require(lines.firstIndex { $0.hasPrefix(#"{"r":"#) })
        let c = try #require(lines.firstIndex { $0.hasPrefix(#"{"c":"#) })
        #expect(r < c)
    }

    @Test("a chunk past the reservation reserves again")
    func pastTheReservation() throws {
        defer { cleanup() }
        let outbox = try Outbox(home: home, desktop: device, boot: "boot-a")
        _ = try outbox.append(text: "one")
        let step = Int(Outbox.reservationStep)
        _ = try outbox.append(texts: (0..<step).map { "line \($0)" })  // through 1 + step: still covered
        #expect(outbox.reserved == 1 + Outbox.reservationStep)
        _ = try outbox.append(text: "over")  // 2 + step
        #expect(outbox.reserved == 2 + 2 * Outbox.reservationStep)
    }

    @Test("same boot: numbering goes on after the last chunk; another boot: after the reservation (a crash may have taken records)")
    func rebootJumps() throws {
        defer { cleanup() }
        var reserved: UInt64 = 0
        do {
            let outbox = try Outbox(home: home, desktop: device, boot: "boot-a")
            _ = try outbox.append(texts: ["one", "two", "three"])
            reserved = outbox.reserved
            #expect(reserved == 3 + Outbox.reservationStep)  // the batch's last number + the step
        }
        do {
            let same = try Outbox(home: home, desktop: device, boot: "boot-a")
            #expect(same.nextSeq == 4)
        }
        let rebooted = try Outbox(home: home, desktop: device, boot: "boot-b")
        #expect(rebooted.nextSeq == reserved + 1)
        #expect(rebooted.pending.map(\.seq) == [1, 2, 3])
        let chunk = try rebooted.append(text: "after the reboot")
        #expect(chunk.seq == reserved + 1)
        #expect(rebooted.reserved == reserved + 1 + Outbox.reservationStep)  // reserved again, in this boot
    }

    @Test("a crash that took the last chunk records: the next boot's chunks never reuse their numbers")
    func crashTookRecords() throws {
        defer { cleanup() }
        do {
            let outbox = try Outbox(home: home, desktop: device, boot: "boot-a")
            _ = try outbox.append(texts: (1...10).map { "line \($0)" })
            try outbox.markAcked(10)
        }
        // What a crash can leave: the header and the (fsynced) reservation, the chunks after the third gone.
        let kept = records().filter { !$0.hasPrefix(#"{"a":"#) }.prefix(5)  // header, reservation, chunks 1…3
        try Data((kept.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        let rebooted = try Outbox(home: home, desktop: device, boot: "boot-b")
        #expect(rebooted.pending.map(\.seq) == [1, 2, 3])
        let chunk = try rebooted.append(text: "new")
        #expect(chunk.seq > 10, "numbered past everything the desktop may have: \(chunk.seq)")
    }

    @Test("the reservation survives a rewrite and the cut of a drained journal")
    func keptByRewriteAndReset() throws {
        defer { cleanup() }
        var reserved: UInt64 = 0
        do {
            let outbox = try Outbox(home: home, desktop: device, boot: "boot-a")
            let chunks = try outbox.append(texts: (1...200).map { "line \($0) with a few dictated words" })
            reserved = outbox.reserved
            try outbox.rewrite(unacknowledged: Array(chunks.suffix(2)), ack: 198)
            #expect(records().first?.contains(#""reserved":\#(reserved),"boot":"boot-a""#) == true, "\(records().first ?? "")")
            try outbox.markAcked(200)
            _ = try outbox.append(texts: (201...400).map { "line \($0) with a few dictated words" })
            try outbox.markAcked(400)
            #expect(try outbox.resetIfDrained())
            #expect(records().count == 1)
        }
        let rebooted = try Outbox(home: home, desktop: device, boot: "boot-b")
        #expect(rebooted.nextSeq == reserved + 1)
    }
}
