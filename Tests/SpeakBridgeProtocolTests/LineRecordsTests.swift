import Testing
@testable import SpeakBridgeProtocol

/// `MessageCodec.lineRecords` (a burst's journal records in one buffer) writes byte for byte what the general encoder
/// writes line by line (`{"c":` + the chunk object + `}` and a newline), for plain, escaped and non-ASCII texts, across
/// digit-count boundaries of the sequence numbers, with and without an ack record first, a batch or one line alone; and
/// it names each chunk's object exactly.
@Suite("Journal records of a burst: one buffer, the same bytes")
struct LineRecordsTests {
    static func texts() -> [String] {
        let plain = ["", "a", "seven b", "eight by", "burst line 12345 with some dictated words in it",
                     String(repeating: "dictated words ", count: 1_000)]
        return plain + JSONStringFastPathTests.samples + JSONStringFastPathTests.generated()
    }

    @Test("the same bytes and objects as the general encoder, from any first seq")
    func sameAsOneByOne() {
        let texts = Self.texts()
        for firstSeq: UInt64 in [1, 7, 95, 990, 99_999, 1 << 53 - 200] {
            for ack: UInt64? in [nil, 12, 99_999, 1 << 53] {
                let lead: [UInt8] = ack.map { Array("{\"a\":\($0)}\n".utf8) } ?? []
                let (bytes, objects) = MessageCodec.lineRecords(texts, firstSeq: firstSeq, ack: ack)
                var general = lead
                var expectedObjects: [Range<Int>] = []
                for (i, text) in texts.enumerated() {
                    let chunk = Chunk(seq: firstSeq + UInt64(i), text: text)
                    general += Array(#"{"c":"#.utf8)
                    let object = JSONValue.object(MessageCodec.chunkFields(chunk)).encoded()
                    expectedObjects.append(general.count..<general.count + object.count)
                    general += object + Array("}\n".utf8)
                }
                #expect(bytes == general)
                #expect(objects == expectedObjects)
                for (i, range) in objects.enumerated() {
                    let chunk = Chunk(seq: firstSeq + UInt64(i), text: texts[i])
                    #expect(Array(bytes[range]) == JSONValue.object(MessageCodec.chunkFields(chunk)).encoded())
                }
                // One line alone (a paced line's record): the same bytes as in a batch of one.
                for (i, text) in texts.enumerated() where i % 5 == 0 {
                    let seq = firstSeq + UInt64(i)
                    let one = MessageCodec.lineRecord(text, seq: seq, ack: ack)
                    let batch = MessageCodec.lineRecords([text], firstSeq: seq, ack: ack)
                    #expect(one.bytes == batch.bytes && [one.object] == batch.objects)
                }
            }
        }
        #expect(MessageCodec.lineRecords([], firstSeq: 1).bytes.isEmpty)
        #expect(MessageCodec.lineRecords([], firstSeq: 1, ack: 7).bytes == Array(#"{"a":7}"#.utf8) + [0x0A])
    }
}
