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
    /// after the ack record `{"a":N}` and a newline when `ack` is given (`Outbox.ackLine`'s); with where each chunk's
    /// object (`{"seq":…}`) is in the bytes.
    package static func lineRecords(_ texts: [String], firstSeq: UInt64,
                                    ack: UInt64? = nil) -> (bytes: [UInt8], objects: [Range<Int>]) {
        // (1) Escaped sizes, negative for a text that is not plain (escaped below rather than copied).
        var sizes: [Int] = []
        sizes.reserveCapacity(texts.count)
        var total = ackRecordSize(ack)
        for i in texts.indices {
            let size = escapedLineSize(texts[i])
            sizes.append(size)
            total += size >= 0 ? size : -size
        }
        // Heads and ends: the same for every record but for the digits of its sequence number.
        total += texts.count * lineRecordFixedBytes + digitCount(from: firstSeq, count: texts.count)
        var objects: [Range<Int>] = []
        objects.reserveCapacity(texts.count)
        // (2) and (3): every byte of the `total` is written below before the count is set.
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            let base = buffer.baseAddress!
            // The cursor is a plain local, captured by no closure (one that is captured by a nested function or a
            // closure is boxed and every access to it checked for exclusivity at run time: 130 instructions a line).
            var number = DecimalCounter()
            var at = putAckRecord(ack, number: &number, base: base)
            for i in texts.indices {
                // The digits: the previous record's, counted up by one (a carry runs through the nines), made from
                // the number only for the first record and when the count of digits grows.
                if i == 0 || !number.increment() { number.set(firstSeq &+ UInt64(i)) }
                let start = at
                at = putLineRecord(texts[i], size: sizes[i], number: number, base: base, at: at)
                objects.append((start + Self.braceSkip)..<(at - 2))  // without `{"c":` and the record's `}\n`
            }
            precondition(at == total, "every record written in full")
            count = at
        }
        return (bytes, objects)
    }

    /// `lineRecords([text], firstSeq: seq, ack:)` without its arrays (a paced line, `Outbox.append(text:)`).
    package static func lineRecord(_ text: String, seq: UInt64, ack: UInt64? = nil) -> (bytes: [UInt8], object: Range<Int>) {
        let size = escapedLineSize(text)
        let lead = ackRecordSize(ack)
        let total = lead + lineRecordFixedBytes + decimalDigits(seq) + (size >= 0 ? size : -size)
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            let base = buffer.baseAddress!
            var number = DecimalCounter()
            var at = putAckRecord(ack, number: &number, base: base)
            number.set(seq)
            at = putLineRecord(text, size: size, number: number, base: base, at: at)
            precondition(at == total, "the record written in full")
            count = at
        }
        return (bytes, (lead + Self.braceSkip)..<(total - 2))
    }

    static let ackRecordHead: StaticString = #"{"a":"#

    /// The size of the ack record `{"a":N}` and a newline, 0 without `ack`.
    static func ackRecordSize(_ ack: UInt64?) -> Int {
        guard let ack else { return 0 }
        return ackRecordHead.utf8CodeUnitCount + decimalDigits(ack) + 2
    }

    /// Writes the ack record at `base` (its room reserved: `ackRecordSize`), if any; returns where it ends.
    @inline(__always)
    static func putAckRecord(_ ack: UInt64?, number: inout DecimalCounter, base: UnsafeMutablePointer<UInt8>) -> Int {
        guard let ack else { return 0 }
        let head = Self.ackRecordHead
        base.update(from: head.utf8Start, count: head.utf8CodeUnitCount)
        var at = head.utf8CodeUnitCount
        number.set(ack)
        number.write(to: base + at)
        at += number.count
        base[at] = UInt8(ascii: "}")
        base[at + 1] = 0x0A
        return at + 2
    }

    static let lineTextKey: StaticString = #","text":""#
    /// A line record's bytes but for its digits and its text: `recordHead`, `lineTextKey`, `finalTrueRecord`.
    static let lineRecordFixedBytes = recordHead.utf8CodeUnitCount + lineTextKey.utf8CodeUnitCount
        + finalTrueRecord.count

    /// The size of `text` written as a JSON string without quotes (`JSONValue.escapedSize`): its UTF-8 size when
    /// every byte is written as itself (one word test per eight bytes), else the negated escaped size.
    @inline(__always)
    static func escapedLineSize(_ text: String) -> Int {
        var text = text
        let plain = text.withUTF8 { bytes in
            JSONValue.skipPlainWords(bytes, from: 0) == bytes.count ? bytes.count : -1
        }
        return plain >= 0 ? plain : -JSONValue.escapedSize(text)
    }

    /// Writes one line record at `base + at` (its room reserved: `lineRecordFixedBytes`, the digits, the text's
    /// `size` as `escapedLineSize` gave it) and returns where it ends.
    @inline(__always)
    static func putLineRecord(_ text: String, size: Int, number: DecimalCounter, base: UnsafeMutablePointer<UInt8>,
                              at start: Int) -> Int {
        let head = Self.recordHead
        let textKey = Self.lineTextKey
        var at = start
        (base + at).update(from: head.utf8Start, count: head.utf8CodeUnitCount)
        at += head.utf8CodeUnitCount
        number.write(to: base + at)
        at += number.count
        (base + at).update(from: textKey.utf8Start, count: textKey.utf8CodeUnitCount)
        at += textKey.utf8CodeUnitCount
        let target = base + at
        var text = text
        text.withUTF8 { utf8 in
            if size >= 0 {
                if let p = utf8.baseAddress { target.update(from: p, count: size) }
            } else {
                var escaped: [UInt8] = []
                escaped.reserveCapacity(-size)
                JSONValue.writeEscaped(utf8, into: &escaped)
                precondition(escaped.count == -size, "escapedSize is exact")
                escaped.withUnsafeBufferPointer { target.update(from: $0.baseAddress!, count: -size) }
            }
        }
        at += size >= 0 ? size : -size
        Self.finalTrueRecord.withUnsafeBufferPointer { (base + at).update(from: $0.baseAddress!, count: $0.count) }
        return at + Self.finalTrueRecord.count
    }

    /// How many decimal digits the `count` numbers from `first` on have in all.
    static func digitCount(from first: UInt64, count: Int) -> Int {
        guard count > 0 else { return 0 }
        var total = 0
        var value = first
        var left = UInt64(count)
        var digits = decimalDigits(first)
        while left > 0 {
            // The numbers with `digits` digits from `value` on: up to 10^digits - 1 (or UInt64.max).
            let top: UInt64 = digits >= 20 ? .max : (0..<digits).reduce(1) { r, _ in r &* 10 } &- 1
            let run = min(left, top &- value &+ 1)
            total += Int(run) * digits
            left -= run
            value &+= run
            digits += 1
        }
        return total
    }

    /// A sequence number as ASCII digits, counted up in place (`lineRecords`): a digit or two touched a record
    /// instead of a division per digit.
    struct DecimalCounter {
        /// The digits, most significant first (at most 20 for a UInt64).
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 20)
        var count = 1

        mutating func set(_ value: UInt64) {
            count = MessageCodec.decimalDigits(value)
            var rest = value
            var i = count
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
        }

        /// Adds one; false when that needs one more digit (every digit was a nine: `set` the number instead).
        mutating func increment() -> Bool {
            var i = count - 1
            while digits[i] == UInt8(ascii: "9") {
                digits[i] = UInt8(ascii: "0")
                guard i > 0 else { return false }
                i -= 1
            }
            digits[i] += 1
            return true
        }

        func write(to target: UnsafeMutablePointer<UInt8>) {
            digits.withUnsafeBufferPointer { target.update(from: $0.baseAddress!, count: count) }
        }
    }
}
