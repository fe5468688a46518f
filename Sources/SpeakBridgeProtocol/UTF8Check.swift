/// Well-formed UTF-8, checked on bytes (Unicode 15, table 3-7): what `String(validating:as: UTF8.self)` accepts,
/// without making the string. Overlong forms, surrogates (U+D800…U+DFFF), code points above U+10FFFF, stray
/// continuation bytes and truncated sequences are all ill-formed. Tested against the standard library on every
/// sequence of one and two bytes, on every lead and second byte followed by the bytes where the rules change, and
/// on random texts, whole and corrupted.
enum UTF8Check {
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let n = bytes.count
        var i = 0
        while i < n {
            // ASCII eight bytes at a time (the common run between non-ASCII letters).
            while n - i >= 8, UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                i += 8
            }
            guard i < n else { return true }
            let lead = base[i]
            if lead < 0x80 {
                i += 1
                continue
            }
            // Every read below is at an index < n, checked first.
            switch lead {
            case 0xC2...0xDF:
                guard n - i >= 2, isContinuation(base[i + 1]) else { return false }
                i += 2
            case 0xE0...0xEF:
                guard n - i >= 3 else { return false }
                let second = base[i + 1]
                let low: UInt8 = lead == 0xE0 ? 0xA0 : 0x80  // E0 80…9F: overlong
                let high: UInt8 = lead == 0xED ? 0x9F : 0xBF  // ED A0…BF: surrogates
                guard second >= low, second <= high, isContinuation(base[i + 2]) else { return false }
                i += 3
            case 0xF0...0xF4:
                guard n - i >= 4 else { return false }
                let second = base[i + 1]
                let low: UInt8 = lead == 0xF0 ? 0x90 : 0x80  // F0 80…8F: overlong
                let high: UInt8 = lead == 0xF4 ? 0x8F : 0xBF  // F4 90…: above U+10FFFF
                guard second >= low, second <= high, isContinuation(base[i + 2]), isContinuation(base[i + 3])
                else { return false }
                i += 4
            default:
                return false  // 80…C1 (a continuation or an overlong lead), F5…FF
            }
        }
        return true
    }

    @inline(__always)
    static func isContinuation(_ b: UInt8) -> Bool { b & 0xC0 == 0x80 }
}
