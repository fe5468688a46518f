/// The journal records of a burst's lines, written into one buffer of their exact size (`Outbox.append(texts:)`).
///
/// Flow: (1) each text's escaped size (its bytes when plain, which one word test per eight bytes tells;
/// `JSONValue.escapedSize` otherwise) and each record's size; (2) one buffer of the total, the lead (an ack record)
/// first; (3) each record written with plain stores: the head with its sequence number, the text (copied, or
/// escaped through `JSONValue.writeEscaped` when it is not plain), the end. Byte for byte what `writeChunkRecord`
/// writes for each `Chunk(seq:line:)`, one after the other; writing them that way cost three `Array.append` calls
/// a line (about 90 instructions each) and its digits twice.
extension MessageCodec {
    /// `{"c":{"seq":` N `,"text":"` TEXT `","final":true}}` and a newline for each text, numbered from `firstSeq`,
    /// after `lead`; with where each chunk's object (`{"seq":…}`) is in the bytes.
    package static func lineRecords(_ texts: [String], firstSeq: UInt64,
                                    lead: [UInt8]) -> (bytes: [UInt8], objects: [Range<Int>]) {
        let textKey: StaticString = #","text":""#
        let head = Self.recordHead
        let end = Self.finalTrueRecord
        // (1) Escaped sizes, negative for a text that is not plain (escaped below rather than copied).
        var sizes: [Int] = []
        sizes.reserveCapacity(texts.count)
        var total = lead.count
        for i in texts.indices {
            var text = texts[i]
            let size = text.withUTF8 { bytes in
                JSONValue.skipPlainWords(bytes, from: 0) == bytes.count ? bytes.count : -1
            }
            let escaped = size >= 0 ? size : JSONValue.escapedSize(text)
            sizes.append(size >= 0 ? size : -escaped)
            total += head.utf8CodeUnitCount + decimalDigits(firstSeq &+ UInt64(i)) + textKey.utf8CodeUnitCount
                + escaped + end.count
        }
        var objects: [Range<Int>] = []
        objects.reserveCapacity(texts.count)
        // (2) and (3): every byte of the `total` is written below before the count is set.
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            let base = buffer.baseAddress!
            var at = 0
            func put(_ source: UnsafePointer<UInt8>, _ n: Int) {
                (base + at).update(from: source, count: n)
                at += n
            }
            lead.withUnsafeBufferPointer { if let p = $0.baseAddress { put(p, $0.count) } }
            for i in texts.indices {
                let start = at
                put(head.utf8Start, head.utf8CodeUnitCount)
                let seq = firstSeq &+ UInt64(i)
                let digits = decimalDigits(seq)
                var rest = seq
                var d = at + digits
                repeat {
                    d -= 1
                    base[d] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                    rest /= 10
                } while rest > 0
                at += digits
                put(textKey.utf8Start, textKey.utf8CodeUnitCount)
                var text = texts[i]
                let size = sizes[i]
                text.withUTF8 { utf8 in
                    if size >= 0 {
                        if let p = utf8.baseAddress { put(p, size) }
                    } else {
                        var escaped: [UInt8] = []
                        escaped.reserveCapacity(-size)
                        JSONValue.writeEscaped(utf8, into: &escaped)
                        precondition(escaped.count == -size, "escapedSize is exact")
                        escaped.withUnsafeBufferPointer { put($0.baseAddress!, $0.count) }
                    }
                }
                end.withUnsafeBufferPointer { put($0.baseAddress!, $0.count) }
                objects.append((start + Self.braceSkip)..<(at - 2))  // without `{"c":` and the record's `}\n`
            }
            precondition(at == total, "every record written in full")
            count = at
        }
        return (bytes, objects)
    }
}
