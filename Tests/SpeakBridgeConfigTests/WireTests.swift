import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

@Suite("Wire format and batch assembly")
struct WireTests {
    /// Found by FuzzConfigWire: a peer's config-error text is kept escaped and bounded; that must be idempotent, or
    /// the message changes in a decode → encode → decode round trip (escaping "\r" lengthens it past the bound).
    @Test("a config-error with control characters and a long code survives decode → encode → decode unchanged")
    func errorTextRoundTrip() throws {
        let body = JSONValue.object([("code", .string("m" + String(repeating: "?", count: 23) + "\r???amaes\u{615B}\u{615B}[31m")),
                                     ("message", .string(String(repeating: "\u{1B}[2J", count: 200)))])
        let decoded = try ConfigWire.decode(type: ConfigWire.errorType, body: body)
        guard case let .config(type, again) = try MessageCodec.decode(MessageCodec.encode(ConfigWire.message(decoded))) else {
            Issue.record("not a config message")
            return
        }
        #expect(try ConfigWire.decode(type: type, body: again) == decoded)
    }

    let desk = device(1)

    /// Found by review: a legal batch's result listing all its keys (1,024 of 128 bytes: 134 KB) did not fit one
    /// transport message, so the desktop committed the batch and then closed the connection ("encryption failed").
    @Test("a result for 1,024 keys of 128 bytes fits one transport message; the keys left out are counted")
    func largeResultFits() throws {
        let keys = (0..<1_024).map { n in
            "k" + String(repeating: "a", count: 62) + "." + String(format4(n)) + String(repeating: "b", count: 60)
        }
        #expect(keys.allSatisfy { $0.utf8.count == 128 && ConfigKey.isValid($0) })
        let result = ConfigResult(batch: "b1", status: .applied, applied: Array(keys[0..<400]),
                                  pending: Array(keys[400..<700]), unchanged: Array(keys[700..<1_000]),
                                  skipped: Array(keys[1_000...]))
        let bytes = MessageCodec.encode(ConfigWire.message(.result(result)))
        #expect(bytes.count <= SpeakBridgeProtocol.maxFrameSize - 16, "\(bytes.count) bytes")
        guard case let .config(type, body) = try MessageCodec.decode(bytes),
              case .result(let back) = try ConfigWire.decode(type: type, body: body) else {
            Issue.record("not a config-result"); return
        }
        #expect(back.status == .applied && back.batch == "b1")
        #expect([back.appliedCount, back.pendingCount, back.unchangedCount, back.skippedCount] == [400, 300, 300, 24])
        #expect(back.omitted.total > 0 && back.omitted.total < 1_024)
        // The listed keys are the first ones, in order: a prefix of the lists as they were.
        let listed = back.applied + back.pending + back.unchanged + back.skipped
        #expect(listed == Array(keys.prefix(listed.count)))
        // A small result is listed whole, without `omitted`.
        let small = ConfigResult(batch: "b2", status: .unchanged, unchanged: ["a.b", "c.d"])
        let smallBytes = MessageCodec.encode(ConfigWire.message(.result(small)))
        #expect(!String(decoding: smallBytes, as: UTF8.self).contains("omitted"))
        guard case let .config(t2, b2) = try MessageCodec.decode(smallBytes) else { Issue.record("not config"); return }
        #expect(try ConfigWire.decode(type: t2, body: b2) == .result(small))
        // Counts out of range are ignored, not trusted.
        let hostile = JSONValue.object([("batch", .string("b3")), ("status", .string("applied")),
                                        ("omitted", .object([("applied", .integer(Int64.max)), ("pending", .integer(-1)),
                                                             ("unchanged", .string("9")), ("skipped", .integer(1_024))]))])
        guard case .result(let r3) = try ConfigWire.decode(type: ConfigWire.resultType, body: hostile) else {
            Issue.record("not a result"); return
        }
        #expect(r3.omitted == .init(skipped: 1_024))
    }

    private func format4(_ n: Int) -> String { String(("000" + String(n)).suffix(4)) }

    @Test("a batch round-trips through the message codec")
    func roundTrip() throws {
        let v = HLCTimestamp(ms: 1_700_000_000_000, counter: 2, device: desk)
        let updates = [
            ConfigUpdate(key: "deepgram.apiKey", version: v, body: .secret("dg_0123456789abcdef9f3a")),
            ConfigUpdate(key: "transcription.locale", version: v, body: .value(.string("en-US"))),
            ConfigUpdate(key: "llm.temperature", version: v, body: .value(.double(0.25))),
            ConfigUpdate(key: "audio.rate", version: v, body: .value(.integer(16_000))),
            ConfigUpdate(key: "ui.dark", version: v, body: .value(.bool(true))),
            ConfigUpdate(key: "old.key", version: v, body: .deleted),
        ]
        let messages = try ConfigWire.offer(batch: "b-1", origin: .push, updates: updates)
        #expect(messages.count == 1)
        let bytes = MessageCodec.encode(ConfigWire.message(messages[0]))
        guard case let .config(type, body) = try MessageCodec.decode(bytes) else { Issue.record("not config"); return }
        #expect(try ConfigWire.decode(type: type, body: body) == messages[0])
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"type":"config-offer","batch":"b-1","part":1,"parts":1,"origin":"push","entries":[{"key":"deepgram.apiKey","version":"1700000000000:2:"#))
    }

    @Test("a large batch is split into parts that each fit one frame, and reassembles in any order")
    func split() throws {
        let v = HLCTimestamp(ms: 1, counter: 0, device: desk)
        // Values full of characters that JSON escapes six-fold still fit.
        let updates = (0..<300).map { i in
            ConfigUpdate(key: "bulk.k\(i)", version: v, body: .value(.string(String(repeating: "\t\"", count: 1_000))))
        }
        let messages = try ConfigWire.offer(batch: "big", origin: .push, updates: updates)
        #expect(messages.count > 1 && messages.count <= ConfigWire.maxParts)
        var parts: [OfferPart] = []
        for m in messages {
            let bytes = MessageCodec.encode(ConfigWire.message(m))
            #expect(bytes.count + 16 <= SpeakBridgeProtocol.maxFrameSize)
            guard case let .config(type, body) = try MessageCodec.decode(bytes),
                  case .offer(let p) = try ConfigWire.decode(type: type, body: body) else { Issue.record("bad part"); return }
            parts.append(p)
        }
        var assembler = BatchAssembler()
        var complete: [ConfigUpdate]?
        for p in parts.reversed() {
            #expect(complete == nil)
            complete = try assembler.add(p)?.entries
        }
        #expect(complete == updates)
        #expect(assembler.incompleteBatches == 0)
    }

    @Test("a batch that cannot fit the part limit is refused by the sender")
    func tooBig() {
        let v = HLCTimestamp(ms: 1, counter: 0, device: desk)
        let huge = (0..<1_000).map { i in
            ConfigUpdate(key: "bulk.k\(i)", version: v, body: .value(.string(String(repeating: "\u{1}", count: 1)
                + String(repeating: "\"", count: 4_000))))
        }
        #expect(throws: ConfigError.self) { try ConfigWire.offer(batch: "b", origin: .push, updates: huge) }
        let many = (0...ConfigWire.maxEntriesPerBatch).map { ConfigUpdate(key: "k.k\($0)", version: v, body: .deleted) }
        #expect(throws: ConfigError.self) { try ConfigWire.offer(batch: "b", origin: .push, updates: many) }
    }

    @Test("a batch missing a part never completes; a repeated part or a disagreeing count drops it")
    func incomplete() throws {
        let v = HLCTimestamp(ms: 1, counter: 0, device: desk)
        let a = OfferPart(batch: "x", part: 1, parts: 2, origin: .push, entries: [ConfigUpdate(key: "a", version: v, body: .deleted)])
        var assembler = BatchAssembler()
        #expect(try assembler.add(a) == nil)
        #expect(throws: ConfigError.self) { try assembler.add(a) }
        #expect(assembler.incompleteBatches == 0)
        _ = try assembler.add(a)
        var b = a
        b.part = 2
        b.parts = 3
        #expect(throws: ConfigError.self) { try assembler.add(b) }
        // The same key in two parts of one batch.
        _ = try assembler.add(a)
        var c = a
        c.part = 2
        #expect(throws: ConfigError.self) { try assembler.add(c) }
        // Many abandoned batches are not kept forever.
        for i in 0..<20 { _ = try assembler.add(OfferPart(batch: "z\(i)", part: 1, parts: 2, origin: .push, entries: [])) }
        #expect(assembler.incompleteBatches <= BatchAssembler.maxPartial)
    }

    @Test("beyond the incomplete-batch limit the oldest goes, never the one that just began, though all began at once")
    func oldestByArrival() throws {
        // Many fresh assemblers: the dictionary's order differs between them, so a choice among equal start times
        // (what the clock gave three parts that came in the same millisecond) would drop the newest batch in some.
        let v = HLCTimestamp(ms: 1, counter: 0, device: desk)
        for round in 0..<64 {
            var assembler = BatchAssembler()
            let ids = (0...BatchAssembler.maxPartial).map { "r\(round)-b\($0)" }
            for id in ids {
                let first = OfferPart(batch: id, part: 1, parts: 2, origin: .push,
                                      entries: [ConfigUpdate(key: "k.a", version: v, body: .deleted)])
                #expect(try assembler.add(first) == nil)
            }
            #expect(assembler.incompleteBatches == BatchAssembler.maxPartial)
            let last = OfferPart(batch: ids.last!, part: 2, parts: 2, origin: .push,
                                 entries: [ConfigUpdate(key: "k.b", version: v, body: .deleted)])
            #expect(try assembler.add(last)?.entries.map(\.key) == ["k.a", "k.b"], "round \(round)")
            // The oldest was the one dropped: its second part starts a new batch instead of completing one.
            let orphan = OfferPart(batch: ids[0], part: 2, parts: 2, origin: .push, entries: [])
            #expect(try assembler.add(orphan) == nil)
        }
    }
}
