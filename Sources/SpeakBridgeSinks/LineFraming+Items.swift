/// `LineFraming.plan` for a batch of sink items, without a text array, a lazy map or an `Array.append` per text:
/// the burst path of the FIFO sink (every batch a runner hands it).
extension LineFraming {
    /// The same plan as `plan(items.lazy.map(\.chunk.text), sanitize:limit:)`, byte for byte (tested). Each text's
    /// bytes are copied once, straight into the stream's storage, and checked there (`isPlain`, still in cache);
    /// a batch with a text that is not plain (one the sanitizer may change) or whose bytes are not contiguous is
    /// laid out by the general `plan` instead, which owns every sanitizing rule.
    static func plan(items: [SinkItem], sanitize: Bool, limit: Int) -> ChunkPlan {
        var total = 0
        // `text`, not `chunk.text`: the text alone is read, not the whole chunk copied per item.
        for item in items { total &+= item.textUTF8Count &+ 1 }
        var ends: [Int] = []
        ends.reserveCapacity(items.count)
        var simple = true
        let stream = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var at = 0
            defer { count = at }  // exactly the bytes written (all of them unless the general path takes over)
            guard let base = buffer.baseAddress else { return }
            for item in items {
                // The frame's bytes, or the string's (contiguous: a native string's storage, or a copy).
                let copied: Bool = item.withTextUTF8 { utf8 in
                    // `total` counted each text's bytes and its "\n": this one fits in what is left.
                    guard let source = utf8.baseAddress, utf8.count > 0 else { return true }
                    (base + at).initialize(from: source, count: utf8.count)
                    let fine = !sanitize || isPlain(UnsafeBufferPointer(start: base + at, count: utf8.count)[...])
                    at += utf8.count
                    return fine
                }
                guard copied else {
                    simple = false
                    return
                }
                base[at] = 0x0A
                at += 1
                ends.append(at)
            }
        }
        guard simple else { return plan(items.lazy.map(\.chunk.text), sanitize: sanitize, limit: limit) }
        return ChunkPlan(stream: stream, ends: ends, limit: limit)
    }
}
