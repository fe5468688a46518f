import Testing
@testable import SpeakBridgeProtocol

/// `JSONValue.skipPlainWords` reads a plain tail of one to seven bytes as the buffer's last eight bytes when the
/// words before it were plain: for every length up to 40 and every place of one byte that needs escaping (or is
/// not ASCII), the writer and `escapedSize` still agree with the scalar-by-scalar oracle, also after an escape
/// earlier in the buffer (where the overlapping load may not be used).
@Suite("JSON strings: the plain tail read as one word")
struct JSONTailWordTests {
    static let specials: [String] = ["\"", "\\", "\n", "\u{1}", "\u{7F}", "é", "\u{85}", "\u{2028}", "😀"]

    @Test("every length, every position of one special scalar, and two specials")
    func everyTail() {
        for length in 0...40 {
            let plain = String((0..<length).map { Character(Unicode.Scalar(UInt8(0x41 + $0 % 26))) })
            var texts = [plain]
            for special in Self.specials {
                for at in 0...length {
                    let cut = plain.index(plain.startIndex, offsetBy: at)
                    texts.append(plain[..<cut] + special + plain[cut...])
                    // An escape before the word run, and another at the end.
                    texts.append(special + plain[..<cut] + "\"" + plain[cut...])
                }
            }
            for text in texts {
                let encoded = JSONValue.string(text).encoded()
                #expect(encoded == JSONStringFastPathTests.oracle(text), "\(Array(text.utf8))")
                #expect(JSONValue.escapedSize(text) == encoded.count - 2)
            }
        }
    }

    @Test("skipPlainWords stops at the first word holding a special byte, or at the end")
    func skipResult() {
        for length in 1...24 {
            for at in -1..<length {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                if at >= 0 { bytes[at] = 0x22 }
                let end = bytes.withUnsafeBufferPointer { JSONValue.skipPlainWords($0, from: 0) }
                if at < 0 {
                    #expect(end == length)
                } else {
                    #expect(end <= at && at - end < 8, "length \(length), quote at \(at): \(end)")
                }
            }
        }
    }
}
