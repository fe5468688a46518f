/// The journal records of a burst's lines, written into one buffer of their exact size (`Outbox.append(texts:)`),
/// and of a paced line (`Outbox.append(text:)`).
///
/// Flow: (1) each text's escaped size (its bytes when plain, which one word test per eight bytes tells;
/// `JSONValue.escapedSize` otherwise) and each record's size; (2) one buffer of the total, an ack record first if
/// one is given; (3) each record written with plain stores: the head, its sequence number (the previous record's
/// digits counted up by one), the text (copied, or escaped through `JSONValue.writeEscaped` when it is not plain),
/// the end. Byte for byte `Outbox`'s record of each `Chunk(seq:line:)`, `{"c":` + its object as the general encoder
/// writes it (`JSONValue.object(MessageCodec.chunkFields(_:))`) + `}` and a newline (`LineRecordsTests`); writing
/// them one record at a time cost three `Array.append` calls a line (about 90 instructions each) and its digits twice.
extension MessageCodec {
    /// `{"c":{"seq":` N `,"text":"` TEXT `","final":true}}` and a newline for each text, numbered from `firstSeq`,
    /// after the ack record `{"a":N}` and a newline when `ack` is given (`Outbox.ackLine`'s); with where each chunk's
    /// object (`{"seq":…}`) is in the bytes.
    package static func lineRecords(_ texts: [String], firstSeq: UInt64,
                                    ack: UInt64? = nil) -> (bytes: [UInt8], objects: [Range<Int>]) {
        records(texts, firstSeq: firstSeq, ack: ack)
    }

    /// `lineRecords` of lines read as bytes (`PlainLines`: every one plain, so copied as it is): no `String` made
    /// for a line on its way from the input to the journal and the frame.
    package static func lineRecords(_ lines: PlainLines, firstSeq: UInt64,
                                    ack: UInt64? = nil) -> (bytes: [UInt8], objects: [Range<Int>]) {
        lines.bytes.withUnsafeBufferPointer { bytes in
            records(PlainLineTexts(bytes: bytes, ranges: lines.ranges), firstSeq: firstSeq, ack: ack)
        }
    }

    /// The records of `lineRecords`, for either kind of texts (specialized for each).
    static func records<Texts: LineRecordTexts>(_ texts: Texts, firstSeq: UInt64,
                                                ack: UInt64?) -> (bytes: [UInt8], objects: [Range<Int>]) {
        // (1) Escaped sizes, negative for a text that is not plain (escaped below rather than copied).
        var sizes: [Int] = []
        sizes.reserveCapacity(texts.count)
        var total = ackRecordSize(ack)
        for i in 0..<texts.count {
            let size = texts.escapedSize(i)
            sizes.append(size)
            total += size >= 0 ? size : -size
        }
        // Heads and ends: the same for every record but for the digits of its sequence number.
        total += texts.count * lineRecordFixedBytes + digitCount(from: firstSeq, count: texts.count)
        var objects: [Range<Int>] = []
        objects.reserveCapacity(texts.count)
        // (2) and (3): every byte of the `total` is written below before the count is set. (Its allocation goes
        // through a generic metadata lookup, about 500 instructions: once a read here, see `lineRecord`.)
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            guard let base = buffer.baseAddress else { return }  // nothing to write
            // The cursor is a plain local, captured by no closure (one that is captured by a nested function or a
            // closure is boxed and every access to it checked for exclusivity at run time: 130 instructions a line).
            var at = putAckRecord(ack, base: base)
            var digits = 0..<0
            for i in 0..<texts.count {
                let start = at
                (at, digits) = texts.withBytes(i) { text in
                    putLineRecord(text, size: sizes[i], seq: firstSeq &+ UInt64(i), previousDigits: digits,
                                  base: base, at: at)
                }
                objects.append((start + Self.braceSkip)..<(at - 2))  // without `{"c":` and the record's `}\n`
            }
            precondition(at == total, "every record written in full")
            count = at
        }
        return (bytes, objects)
    }

    /// Where a plain text of `count` bytes is in its record's chunk object (`lineRecords`' `objects[i]`): right
    /// before the object's fixed end `","final":true}`.
    package static func plainTextRange(inObject object: Range<Int>, count: Int) -> Range<Int> {
        let end = object.upperBound - (lineRecordEnd.utf8CodeUnitCount - 2)  // the end without the record's `}\n`
        return (end - count)..<end
    }

    /// `lineRecords([text], firstSeq: seq, ack:)` without its arrays (a paced line, `Outbox.append(text:)`).
    package static func lineRecord(_ text: String, seq: UInt64,
                                   ack: UInt64? = nil) -> (bytes: [UInt8], object: Range<Int>) {
        var text = text
        let size = escapedLineSize(&text)
        return text.withUTF8 { lineRecord($0, size: size, seq: seq, ack: ack) }
    }

    /// `lineRecord` of the one line of `line` (a paced line read as bytes, `Outbox.append(line:)`).
    package static func lineRecord(_ line: PlainLines, seq: UInt64,
                                   ack: UInt64? = nil) -> (bytes: [UInt8], object: Range<Int>) {
        precondition(line.ranges.count == 1, "one line")
        let range = line.ranges[0]
        return line.bytes.withUnsafeBufferPointer {
            lineRecord(UnsafeBufferPointer(rebasing: $0[range]), size: range.count, seq: seq, ack: ack)
        }
    }

    /// The record of `lineRecord`: `utf8` the text, `size` its `escapedLineSize`.
    static func lineRecord(_ utf8: UnsafeBufferPointer<UInt8>, size: Int, seq: UInt64,
                           ack: UInt64?) -> (bytes: [UInt8], object: Range<Int>) {
        let lead = ackRecordSize(ack)
        let total = lead + lineRecordFixedBytes + decimalDigits(seq) + (size >= 0 ? size : -size)
        // Written on the stack, then copied into the array: both `init(unsafeUninitializedCapacity:)` and
        // `init(repeating:count:)` allocated through a generic metadata lookup, about 500 instructions a call, more
        // than the rest of a paced line's record; `init(_:)` of a buffer does not.
        let bytes = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { buffer in
            let base = buffer.baseAddress!
            let start = putAckRecord(ack, base: base)
            let (end, _) = putLineRecord(utf8, size: size, seq: seq, previousDigits: 0..<0, base: base, at: start)
            precondition(end == total, "the record written in full")
            return [UInt8](UnsafeBufferPointer(start: base, count: total))
        }
        return (bytes, (lead + Self.braceSkip)..<(total - 2))
    }

    // The constant parts, as static strings (no lazy global to check on each use).
    static let lineRecordHead: StaticString = #"{"c":{"seq":"#
    static let lineTextKey: StaticString = #","text":""#
    static let lineRecordEnd: StaticString = "\",\"final\":true}}\n"
    static let ackRecordHead: StaticString = #"{"a":"#

    /// A line record's bytes but for its digits and its text.
    static let lineRecordFixedBytes = lineRecordHead.utf8CodeUnitCount + lineTextKey.utf8CodeUnitCount
        + lineRecordEnd.utf8CodeUnitCount

    /// The size of `text` written as a JSON string without quotes (`JSONValue.escapedSize`): its UTF-8 size when
    /// every byte is written as itself (one word test per eight bytes), else the negated escaped size.
    @inline(__always)
    static func escapedLineSize(_ text: inout String) -> Int {
        let plain = text.withUTF8 { bytes in
            JSONValue.skipPlainWords(bytes, from: 0) == bytes.count ? bytes.count : -1
        }
        return plain >= 0 ? plain : -JSONValue.escapedSize(text)
    }

    /// Writes one line record at `base + at` (its room reserved: `lineRecordFixedBytes`, the digits, the text's
    /// `size` as `escapedLineSize` gave it); returns where it ends and where its digits are. `previousDigits`: where
    /// the digits of `seq - 1` are in `base` (empty: none), counted up by one instead of dividing.
    @inline(__always)
    static func putLineRecord(_ utf8: UnsafeBufferPointer<UInt8>, size: Int, seq: UInt64, previousDigits: Range<Int>,
                              base: UnsafeMutablePointer<UInt8>, at start: Int) -> (end: Int, digits: Range<Int>) {
        var at = start
        at = put(Self.lineRecordHead, base, at)
        let digitsStart = at
        if previousDigits.isEmpty
            || !putNextDigits(from: base + previousDigits.lowerBound, count: previousDigits.count, to: base + at) {
            at += putDigits(seq, base + at)
        } else {
            at += previousDigits.count
        }
        let digits = digitsStart..<at
        at = put(Self.lineTextKey, base, at)
        let target = base + at
        if size >= 0 {
            if let p = utf8.baseAddress { target.update(from: p, count: size) }
        } else {
            var escaped: [UInt8] = []
            escaped.reserveCapacity(-size)
            JSONValue.writeEscaped(utf8, into: &escaped)
            precondition(escaped.count == -size, "escapedSize is exact")
            escaped.withUnsafeBufferPointer { target.update(from: $0.baseAddress!, count: -size) }
        }
        at += size >= 0 ? size : -size
        return (put(Self.lineRecordEnd, base, at), digits)
    }

    /// The size of the ack record `{"a":N}` and a newline, 0 without `ack`.
    static func ackRecordSize(_ ack: UInt64?) -> Int {
        guard let ack else { return 0 }
        return ackRecordHead.utf8CodeUnitCount + decimalDigits(ack) + 2
    }

    /// Writes the ack record at `base` (its room reserved: `ackRecordSize`), if any; returns where it ends.
    @inline(__always)
    static func putAckRecord(_ ack: UInt64?, base: UnsafeMutablePointer<UInt8>) -> Int {
        guard let ack else { return 0 }
        var at = put(Self.ackRecordHead, base, 0)
        at += putDigits(ack, base + at)
        base[at] = UInt8(ascii: "}")
        base[at + 1] = 0x0A
        return at + 2
    }

    @inline(__always)
    static func put(_ constant: StaticString, _ base: UnsafeMutablePointer<UInt8>, _ at: Int) -> Int {
        (base + at).update(from: constant.utf8Start, count: constant.utf8CodeUnitCount)
        return at + constant.utf8CodeUnitCount
    }

    /// Writes the decimal digits of `value` at `target`; returns how many.
    @inline(__always)
    static func putDigits(_ value: UInt64, _ target: UnsafeMutablePointer<UInt8>) -> Int {
        let count = decimalDigits(value)
        var rest = value
        var i = count
        repeat {
            i -= 1
            target[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
        return count
    }

    /// Writes the `count` digits at `previous` plus one at `target`; false when they were all nines (the number has
    /// one digit more: the caller writes it with `putDigits`).
    @inline(__always)
    static func putNextDigits(from previous: UnsafePointer<UInt8>, count: Int,
                              to target: UnsafeMutablePointer<UInt8>) -> Bool {
        target.update(from: previous, count: count)
        var i = count - 1
        while target[i] == UInt8(ascii: "9") {
            target[i] = UInt8(ascii: "0")
            guard i > 0 else { return false }
            i -= 1
        }
        target[i] += 1
        return true
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
}

/// The texts `MessageCodec.records` writes: their count, each one's escaped size (`escapedLineSize`'s sign rule) and
/// its UTF-8 bytes.
protocol LineRecordTexts {
    var count: Int { get }
    func escapedSize(_ i: Int) -> Int
    func withBytes<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R
}

extension Array: LineRecordTexts where Element == String {
    @inline(__always)
    func escapedSize(_ i: Int) -> Int {
        var text = self[i]  // the helpers take it inout (a copy each cost a retain and release)
        return MessageCodec.escapedLineSize(&text)
    }

    @inline(__always)
    func withBytes<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var text = self[i]  // shares the array's string: `withUTF8` on a native string makes no copy
        return text.withUTF8(body)
    }
}

/// `PlainLines` borrowed for one `records` call.
struct PlainLineTexts: LineRecordTexts {
    let bytes: UnsafeBufferPointer<UInt8>
    let ranges: [Range<Int>]

    var count: Int { ranges.count }

    @inline(__always)
    func escapedSize(_ i: Int) -> Int { ranges[i].count }  // plain: written as itself

    @inline(__always)
    func withBytes<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(UnsafeBufferPointer(rebasing: bytes[ranges[i]]))
    }
}

/// Lines as bytes, each of them plain (printable ASCII other than `"` and `\`, so written into a JSON string as
/// itself), non-empty and at most the protocol's text limit: what `send` journals and frames without making a
/// `String` (`Outbox.append(lines:)`). `make` checks all of it; a batch with any other line is nil, and its lines
/// go the way of texts (`InputLines.pieces`).
package struct PlainLines: Sendable {
    package let bytes: [UInt8]
    package let ranges: [Range<Int>]

    package static func make(bytes: [UInt8], ranges: [Range<Int>]) -> PlainLines? {
        let plain = bytes.withUnsafeBufferPointer { buffer in
            ranges.allSatisfy { range in
                !range.isEmpty && range.lowerBound >= 0 && range.upperBound <= buffer.count
                    && range.count <= SpeakBridgeProtocol.maxChunkTextBytes
                    && range.count <= OutboxWindow.maxEscapedTextBytes
                    && JSONValue.skipPlainWords(UnsafeBufferPointer(rebasing: buffer[range]), from: 0) == range.count
            }
        }
        return plain && !ranges.isEmpty ? PlainLines(bytes: bytes, ranges: ranges) : nil
    }

    private init(bytes: [UInt8], ranges: [Range<Int>]) {
        self.bytes = bytes
        self.ranges = ranges
    }
}
