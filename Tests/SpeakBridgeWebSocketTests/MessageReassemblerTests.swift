import SpeakBridgeTestSupport
import Testing
import SpeakBridgeWebSocket

/// The pure reassembly and size rules, fed the way lws feeds RECEIVE callbacks.
@Suite struct MessageReassemblerTests {
    typealias Step = MessageReassembler.Step
    static let tooBig = Step.refuse(code: 1009, reason: "message too big")

    /// Feeds one frame of `payload` in pieces of `chunk` bytes, as lws would: each callback carries the bytes and
    /// what the header announced that has not arrived yet.
    static func feed(_ assembler: inout MessageReassembler, frame payload: [UInt8], final: Bool, chunk: Int) -> [Step] {
        if payload.isEmpty {
            return [assembler.receive(isBinary: true, isFinalFragment: final, bytes: [], announcedRemaining: 0)]
        }
        var steps: [Step] = []
        var offset = 0
        while offset < payload.count {
            let end = min(payload.count, offset + chunk)
            let remaining = UInt64(payload.count - end)
            steps.append(assembler.receive(isBinary: true, isFinalFragment: final && remaining == 0,
                                           bytes: Array(payload[offset..<end]), announcedRemaining: remaining))
            offset = end
        }
        return steps
    }

    @Test func singleFrameByteAtATimeAndAllAtOnce() {
        let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for chunk in [1, 2, 7, 64, 299, 300, 4096] {
            var assembler = MessageReassembler(maxMessageSize: 300)
            let steps = Self.feed(&assembler, frame: payload, final: true, chunk: chunk)
            #expect(steps.dropLast().allSatisfy { $0 == .needMore }, "chunk \(chunk)")
            #expect(steps.last == .message(payload), "chunk \(chunk)")
            #expect(assembler.buffered.isEmpty)
        }
    }

    @Test func fragmentsAreJoinedAndEmptyMessagesDelivered() {
        var assembler = MessageReassembler(maxMessageSize: 10)
        #expect(Self.feed(&assembler, frame: [1, 2], final: false, chunk: 1) == [.needMore, .needMore])
        #expect(Self.feed(&assembler, frame: [], final: false, chunk: 1) == [.needMore])
        #expect(Self.feed(&assembler, frame: [3], final: true, chunk: 1) == [.message([1, 2, 3])])
        #expect(Self.feed(&assembler, frame: [], final: true, chunk: 1) == [.message([])])
        // The next message starts from scratch.
        #expect(Self.feed(&assembler, frame: [9], final: true, chunk: 1) == [.message([9])])
    }

    @Test func limitEdges() {
        for limit in [1, 2, 100, 65_535] {
            var exact = MessageReassembler(maxMessageSize: limit)
            let full = [UInt8](repeating: 7, count: limit)
            #expect(Self.feed(&exact, frame: full, final: true, chunk: 4096).last == .message(full))

            // One byte more, announced by the header: refused at the first callback, whatever arrived.
            var over = MessageReassembler(maxMessageSize: limit)
            #expect(over.receive(isBinary: true, isFinalFragment: false, bytes: [7],
                                 announcedRemaining: UInt64(limit)) == Self.tooBig)
            #expect(over.buffered.isEmpty)

            // Split over two frames: the second frame's header pushes it over.
            var split = MessageReassembler(maxMessageSize: limit)
            let first = [UInt8](repeating: 1, count: (limit + 1) / 2)
            #expect(Self.feed(&split, frame: first, final: false, chunk: 4096).allSatisfy { $0 == .needMore })
            let rest = limit - first.count
            #expect(split.receive(isBinary: true, isFinalFragment: false, bytes: [2],
                                  announcedRemaining: UInt64(rest)) == Self.tooBig)
        }
    }

    @Test func overflowingAnnouncementsAreRefusedWithoutTrapping() {
        let huge: [UInt64] = [UInt64(Int.max), UInt64(Int.max) - 1, UInt64(Int.max) + 1, .max, .max - 1, 1 << 32, 65_536]
        for announced in huge {
            // The attack of issue 8 row 1: a fragment, then a continuation announcing 2^63 − 1.
            var assembler = MessageReassembler(maxMessageSize: 65_535)
            #expect(assembler.receive(isBinary: true, isFinalFragment: false, bytes: [1, 2, 3], announcedRemaining: 0) == .needMore)
            #expect(assembler.receive(isBinary: true, isFinalFragment: false, bytes: [4],
                                      announcedRemaining: announced) == Self.tooBig, "announced \(announced)")
            // With nothing buffered and nothing in this callback too.
            var empty = MessageReassembler(maxMessageSize: Int.max)
            if announced > UInt64(Int.max) {
                #expect(empty.receive(isBinary: true, isFinalFragment: false, bytes: [], announcedRemaining: announced) == Self.tooBig)
            }
        }
        // A limit of Int.max with a full announcement is fine: nothing overflows.
        var unlimited = MessageReassembler(maxMessageSize: .max)
        #expect(unlimited.receive(isBinary: true, isFinalFragment: false, bytes: [1], announcedRemaining: UInt64(Int.max - 1)) == .needMore)
        #expect(unlimited.receive(isBinary: true, isFinalFragment: false, bytes: [1], announcedRemaining: UInt64(Int.max)) == Self.tooBig)
    }

    @Test func textIsRefusedAndRefusalSticks() {
        var assembler = MessageReassembler(maxMessageSize: 10)
        let refusal = Step.refuse(code: 1003, reason: "binary frames only")
        #expect(assembler.receive(isBinary: false, isFinalFragment: true, bytes: [65], announcedRemaining: 0) == refusal)
        #expect(assembler.isRefused)
        #expect(assembler.receive(isBinary: true, isFinalFragment: true, bytes: [1], announcedRemaining: 0) == refusal)

        var big = MessageReassembler(maxMessageSize: 1)
        #expect(big.receive(isBinary: true, isFinalFragment: true, bytes: [1, 2], announcedRemaining: 0) == Self.tooBig)
        #expect(big.receive(isBinary: true, isFinalFragment: true, bytes: [], announcedRemaining: 0) == Self.tooBig)
    }

    @Test func negativeLimitMeansNothingFits() {
        var assembler = MessageReassembler(maxMessageSize: -5)
        #expect(assembler.maxMessageSize == 0)
        #expect(assembler.receive(isBinary: true, isFinalFragment: true, bytes: [], announcedRemaining: 0) == .message([]))
        #expect(assembler.receive(isBinary: true, isFinalFragment: true, bytes: [1], announcedRemaining: 0) == Self.tooBig)
    }

    /// Seeded random callbacks: never more buffered than the limit, a delivered message never over the limit, and
    /// refusal exactly when the running total would exceed it.
    @Test func randomCallbacksKeepTheInvariants() {
        var rng = SplitMix64(seed: 0x5EED_0001)
        for _ in 0..<2_000 {
            let limit = Int(rng.next() % 300)
            var assembler = MessageReassembler(maxMessageSize: limit)
            var model: [UInt8] = []
            for _ in 0..<20 {
                let count = Int(rng.next() % 64)
                let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                let announced: UInt64 = switch rng.next() % 4 {
                case 0: 0
                case 1: rng.next() % 64
                case 2: rng.next()
                default: UInt64(Int.max) - rng.next() % 4
                }
                let final = rng.next() % 3 == 0
                let step = assembler.receive(isBinary: true, isFinalFragment: final, bytes: bytes, announcedRemaining: announced)
                let total = UInt64(model.count) + UInt64(count)
                if total > UInt64(limit) || announced > UInt64(limit) - total {
                    #expect(step == Self.tooBig)
                    break
                }
                model += bytes
                if final && announced == 0 {
                    #expect(step == .message(model))
                    model = []
                } else {
                    #expect(step == .needMore)
                }
                #expect(assembler.buffered.count <= limit)
            }
        }
    }
}
