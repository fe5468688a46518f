import SpeakBridgeCrypto
import SpeakBridgeProtocol
import Testing
@testable import SpeakBridgeDelivery

/// `DeliveryLevels` keeps one entry per session and a running `pendingChunks`; it must answer exactly as the
/// per-map version it replaced (`Reference` below, that version's code) for any sequence of operations.
@Suite("Delivery levels")
struct DeliveryLevelsTests {
    typealias SessionKey = DeliveryPipeline.SessionKey

    /// The previous implementation: one dictionary per sink and per level, `pendingChunks` summed on each read.
    struct Reference {
        var taken: [[SessionKey: UInt64]]
        var pending: [SessionKey: UInt64] = [:]
        var durable: [SessionKey: UInt64] = [:]

        init(sinks: Int, seeds: [SessionKey: [Int: UInt64]]) {
            taken = Array(repeating: [:], count: sinks)
            for (key, bySink) in seeds {
                let fallback = bySink.values.max() ?? 0
                for sink in 0..<sinks { taken[sink][key] = bySink[sink] ?? fallback }
                durable[key] = (0..<sinks).map { taken[$0][key]! }.min() ?? fallback
            }
        }
        func level(sink: Int, _ key: SessionKey) -> UInt64? { taken[sink][key] }
        mutating func adopt(sink: Int, _ key: SessionKey, _ seq: UInt64) {
            if taken[sink][key] == nil { taken[sink][key] = seq }
            settle(key)
        }
        mutating func advance(sink: Int, _ key: SessionKey, to seq: UInt64) -> Bool {
            taken[sink][key] = max(taken[sink][key] ?? 0, seq)
            return settle(key)
        }
        @discardableResult
        mutating func settle(_ key: SessionKey) -> Bool {
            guard let all = taken.map({ $0[key] ?? 0 }).min() else { return false }
            guard all > (durable[key] ?? 0), all > (pending[key] ?? 0) else { return false }
            pending[key] = all
            return true
        }
        var pendingChunks: UInt64 {
            pending.reduce(UInt64(0)) { sum, entry in
                let floor = durable[entry.key] ?? 0
                return sum &+ (entry.value > floor ? entry.value - floor : 0)
            }
        }
        mutating func takePending() -> [SessionKey: UInt64] {
            defer { pending = [:] }
            return pending
        }
        mutating func requeue(_ batch: [SessionKey: UInt64]) {
            for (key, seq) in batch where seq > (pending[key] ?? 0) { pending[key] = seq }
        }
        mutating func commit(_ batch: [SessionKey: UInt64]) -> [(SessionKey, UInt64)] {
            var advanced: [(SessionKey, UInt64)] = []
            for (key, seq) in batch where seq > (durable[key] ?? 0) {
                durable[key] = seq
                advanced.append((key, seq))
            }
            return advanced
        }
        mutating func retire(_ key: SessionKey) {
            for sink in taken.indices { taken[sink][key] = nil }
            durable[key] = nil
            pending[key] = nil
        }
        mutating func forget(_ device: DeviceID) {
            for sink in taken.indices { taken[sink] = taken[sink].filter { $0.key.device != device } }
            durable = durable.filter { $0.key.device != device }
            pending = pending.filter { $0.key.device != device }
        }
    }

    static func sorted(_ list: [(SessionKey, UInt64)]) -> [String] {
        list.map { "\($0.0.device) \($0.0.session) \($0.1)" }.sorted()
    }

    @Test(arguments: [1, 2, 3])
    func answersAsThePerMapVersionForRandomOperations(sinks: Int) {
        let devices = ["a", "b"].map { DeviceID(publicKeyDigest: SHA256.hash(Array($0.utf8))) }
        let keys = devices.flatMap { d in ["s1", "s2", "s3"].map { SessionKey(device: d, session: $0) } }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<40 {
            var seeds: [SessionKey: [Int: UInt64]] = [:]
            for key in keys where Bool.random(using: &rng) {
                for sink in 0..<sinks where Bool.random(using: &rng) { seeds[key, default: [:]][sink] = .random(in: 0...5) }
                if seeds[key] == nil { seeds[key] = [:] }
            }
            var new = DeliveryLevels(sinks: sinks, seeds: seeds)
            var old = Reference(sinks: sinks, seeds: seeds)
            var taken: [(SessionKey, UInt64)] = []  // a batch the committer holds
            for step in 0..<300 {
                let key = keys.randomElement(using: &rng)!
                let sink = Int.random(in: 0..<sinks, using: &rng)
                switch Int.random(in: 0..<100, using: &rng) {
                case 0..<55:
                    let seq = UInt64.random(in: 0...40, using: &rng)
                    // Half the advances follow a submit's look-up of the same session (`rememberingLevel`), as a
                    // paced line's do; the other operations then change `sessions` between look-up and advance.
                    if Bool.random(using: &rng) {
                        #expect(new.rememberingLevel(sink: sink, key) == old.level(sink: sink, key))
                    }
                    #expect(new.advance(sink: sink, key, to: seq) == old.advance(sink: sink, key, to: seq))
                case 55..<60:
                    let seq = UInt64.random(in: 0...40, using: &rng)
                    new.adopt(sink: sink, key, seq)
                    old.adopt(sink: sink, key, seq)
                case 60..<72:
                    taken = new.takePending()
                    #expect(Set(taken.map(\.0)).count == taken.count, "each session once")
                    #expect(Dictionary(uniqueKeysWithValues: taken) == old.takePending())
                case 72..<84:
                    #expect(Self.sorted(new.commit(taken))
                            == Self.sorted(old.commit(Dictionary(uniqueKeysWithValues: taken))))
                case 84..<88:
                    new.requeue(taken)
                    old.requeue(Dictionary(uniqueKeysWithValues: taken))
                case 88..<96:
                    new.retire(key)
                    old.retire(key)
                default:
                    new.forget(key.device)
                    old.forget(key.device)
                }
                if Int.random(in: 0..<4, using: &rng) == 0 {  // a look-up left behind for a later operation
                    let other = keys.randomElement(using: &rng)!
                    #expect(new.rememberingLevel(sink: sink, other) == old.level(sink: sink, other))
                }
                #expect(new.pending == old.pending, "step \(step)")
                #expect(new.pendingChunks == old.pendingChunks, "step \(step)")
                #expect(new.ackLevels == old.durable, "step \(step)")
                for k in keys {
                    #expect(new.ackLevel(k) == old.durable[k])
                    for s in 0..<sinks { #expect(new.level(sink: s, k) == old.level(sink: s, k)) }
                }
            }
        }
    }
}
