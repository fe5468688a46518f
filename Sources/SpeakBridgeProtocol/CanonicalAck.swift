/// The client's per-frame fast path for the desktop's most frequent message: an `ack` exactly as
/// `MessageCodec.encode` writes it, `{"type":"ack","session":"<id>","seq":<n>}`, read byte by byte instead of
/// through a JSONValue tree (the tree cost about 11,000 instructions per ack frame).
///
/// It accepts only that one spelling, with a valid session ID (1-64 of A-Z a-z 0-9 . _ -, so nothing to unescape)
/// and a seq of at most 16 digits, no leading zero, at most 2^53; anything else — other spacing or member order,
/// extra members, escapes, any doubt — is nil, and `MessageCodec.decode` decides as before. So whatever it
/// returns is what `decode` returns for the same bytes (tested, and fuzzed: FuzzMessageCodec checks it on every input).
public enum CanonicalAck {
    static let prefix = Array(#"{"type":"ack","session":""#.utf8)
    static let seqKey = Array(#"","seq":"#.utf8)

    public static func decode(_ bytes: [UInt8]) -> Message? {
        bytes.withUnsafeBufferPointer { b -> Message? in
            let count = b.count
            guard count > prefix.count + seqKey.count + 2, count <= 256 else { return nil }
            for i in 0..<prefix.count where b[i] != prefix[i] { return nil }
            // The session ID: up to the closing quote, only characters that need no escaping.
            var i = prefix.count
            let sessionStart = i
            while i < count, isSessionByte(b[i]) { i += 1 }
            let sessionLength = i - sessionStart
            guard (1...64).contains(sessionLength), i + seqKey.count < count else { return nil }
            for k in 0..<seqKey.count where b[i + k] != seqKey[k] { return nil }
            let session = String(decoding: UnsafeBufferPointer(rebasing: b[sessionStart..<i]), as: UTF8.self)
            i += seqKey.count
            // The seq: digits, then the closing brace as the last byte.
            let digitsStart = i
            var seq: UInt64 = 0
            while i < count, b[i] >= 0x30, b[i] <= 0x39 {
                let (times10, overflow) = seq.multipliedReportingOverflow(by: 10)
                let (next, carry) = times10.addingReportingOverflow(UInt64(b[i] - 0x30))
                guard !overflow, !carry, i - digitsStart < 16 else { return nil }
                seq = next
                i += 1
            }
            let digits = i - digitsStart
            guard digits >= 1, !(digits > 1 && b[digitsStart] == 0x30), seq <= MessageCodec.maxSeq,
                  i == count - 1, b[i] == UInt8(ascii: "}") else { return nil }
            return .ack(session: session, seq: seq)
        }
    }

    static func isSessionByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
    }
}
