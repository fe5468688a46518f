import Testing
@testable import SpeakBridgeProtocol
import SpeakBridgeSupport

/// Issue 8 row 4: the one escaping of peer text for logs, terminals and error messages.
@Suite("PeerText: peer strings escaped visibly")
struct PeerTextTests {
    static let unsafeRanges: [ClosedRange<UInt32>] = [
        0x00...0x1F, 0x7F...0x9F, 0x061C...0x061C, 0x200E...0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028...0x2029,
    ]

    /// The 79 escaped scalars, as a table (the oracle for the classification).
    static let unsafeTable: [Bool] = {
        var table = [Bool](repeating: false, count: 0x2070)
        for range in unsafeRanges { for v in range { table[Int(v)] = true } }
        return table
    }()

    static func isUnsafe(_ v: UInt32) -> Bool { v < 0x2070 && unsafeTable[Int(v)] }

    @Test("every Unicode scalar: escaped exactly when it is a control, bidi or line separator; output safe and idempotent")
    func everyScalar() {
        var failures: [String] = []
        var safe = String.UnicodeScalarView()
        for v in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(v) else { continue }  // surrogates
            guard PeerText.needsEscape(scalar) == Self.isUnsafe(v) else {
                failures.append("U+\(String(v, radix: 16)) misclassified")
                continue
            }
            guard Self.isUnsafe(v) else {
                // `escape` rewrites exactly the scalars `needsEscape` names (checked for all of them above); that
                // the rest pass unchanged is checked on the whole Basic Multilingual Plane at once.
                if v <= 0xFFFF { safe.append(scalar) }
                continue
            }
            let text = "a" + String(Character(scalar)) + "b"
            let escaped = PeerText.escape(text)
            let ok = escaped != text && PeerText.escape(escaped) == escaped
                && escaped.unicodeScalars.allSatisfy { $0.isASCII && !PeerText.needsEscape($0) }
            if !ok { failures.append("U+\(String(v, radix: 16)) → \(escaped.debugDescription)") }
        }
        let all = String(safe) + "𝄞😀\u{E0001}\u{10FFFD}"
        #expect(safe.count == 0x10000 - 0x800 - 79)  // the BMP but surrogates and the 79 escaped scalars
        #expect(PeerText.escape(all) == all)
        #expect(failures.isEmpty, "\(failures.prefix(20))")
    }

    @Test("escapes name what they replace")
    func visibleForms() {
        #expect(PeerText.escape("\u{1B}]52;c;SGk=\u{07}") == #"\x1b]52;c;SGk=\x07"#)  // OSC 52
        #expect(PeerText.escape("\u{1B}[2J\u{1B}[31m") == #"\x1b[2J\x1b[31m"#)  // CSI
        #expect(PeerText.escape("\u{9B}31m\u{9D}0;t\u{9C}\u{90}q\u{9C}") == #"\u{9B}31m\u{9D}0;t\u{9C}\u{90}q\u{9C}"#)  // 8-bit CSI, OSC, DCS
        #expect(PeerText.escape("\u{1B}P1$r\u{1B}\\") == #"\x1bP1$r\x1b\"#)  // DCS, ST
        #expect(PeerText.escape("evil\u{202E}gpj.exe") == #"evil\u{202E}gpj.exe"#)
        #expect(PeerText.escape("\u{2066}\u{2067}\u{2068}\u{2069}\u{200E}\u{200F}\u{061C}")
                == #"\u{2066}\u{2067}\u{2068}\u{2069}\u{200E}\u{200F}\u{61C}"#)
        #expect(PeerText.escape("a\nspeakbridge: paired with \"X\"") == #"a\nspeakbridge: paired with "X""#)
        #expect(PeerText.escape("\r\t\u{0}\u{7F}\u{85}\u{2028}\u{2029}") == #"\r\t\x00\x7f\u{85}\u{2028}\u{2029}"#)
        #expect(PeerText.escape("plain text, ünïcödé, 日本語, emoji 👩‍👩‍👧, back\\slash") == "plain text, ünïcödé, 日本語, emoji 👩‍👩‍👧, back\\slash")
    }

    @Test("never a raw newline, whatever the input")
    func noNewline() {
        let hostile = "x\n\r\u{85}\u{2028}\u{2029}\u{0B}\u{0C}y"
        let escaped = PeerText.escape(hostile)
        #expect(!escaped.contains("\n") && !escaped.contains("\r"))
        #expect(escaped.split(whereSeparator: \.isNewline).count == 1)
    }

    @Test("the limit cuts the original text, then escapes")
    func limit() {
        #expect(PeerText.escape("abc", limit: 5) == "abc")
        #expect(PeerText.escape("\u{1B}bcdef", limit: 3) == #"\x1bbc…"#)
    }

    @Test("utf8Prefix: whole scalars within a bound in bytes, however the text is clustered")
    func utf8Prefix() {
        #expect(PeerText.utf8Prefix("abc", maxBytes: 3) == "abc")
        #expect(PeerText.utf8Prefix("abcd", maxBytes: 3) == "abc")
        #expect(PeerText.utf8Prefix("a\u{E9}", maxBytes: 2) == "a")  // é takes 2 bytes: not cut in half
        #expect(PeerText.utf8Prefix("\u{1F600}x", maxBytes: 3) == "")
        #expect(PeerText.utf8Prefix("abc", maxBytes: 0) == "")
        // One grapheme cluster of 1 + 2 × 5,000 bytes: `prefix(64)` would keep all of it.
        let cluster = "x" + String(repeating: "\u{301}", count: 5_000)
        #expect(cluster.count == 1)
        let cut = PeerText.utf8Prefix(cluster, maxBytes: 64)
        #expect(cut.utf8.count == 63)
        #expect(cut.unicodeScalars.elementsEqual(cluster.unicodeScalars.prefix(32)))
        for n in 0...12 {
            let text = "a\u{E9}\u{20AC}\u{1F600}b"  // 1 + 2 + 3 + 4 + 1 bytes
            let cut = PeerText.utf8Prefix(text, maxBytes: n)
            #expect(cut.utf8.count <= n)
            #expect(text.unicodeScalars.starts(with: cut.unicodeScalars))
            #expect(cut.utf8.count + 4 > n || cut == text)  // no longer prefix fits (no scalar is over 4 bytes)
        }
    }

    @Test("JSON output carries no raw control, C1, bidi or separator, and parses back to the same string")
    func jsonEscaping() throws {
        var all = String.UnicodeScalarView()
        for range in Self.unsafeRanges { for v in range { all.append(Unicode.Scalar(v)!) } }
        let text = "n\"\\" + String(all) + "ok ü 👩‍👩‍👧"
        let encoded = JSONValue.string(text).encoded()
        let json = String(decoding: encoded, as: UTF8.self)
        #expect(!json.unicodeScalars.contains(where: PeerText.needsEscape), "\(json)")
        #expect(json.contains(#"\u202e"#) && json.contains(#"\u009b"#) && json.contains(#"\u001b"#) && json.contains(#"\n"#))
        #expect(try JSONValue.parse(encoded) == .string(text))
    }
}
