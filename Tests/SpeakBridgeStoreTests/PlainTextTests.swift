// The plain string loops (SpeakBridgeSupport/PlainText.swift) give what the standard library's joined(separator:),
// firstRange(of:) and split(separator:) give, for the ASCII separators and markers their callers use.
import SpeakBridgeSupport
import Testing

@Suite("Plain joining, searching and splitting")
struct PlainTextTests {
    static let lists: [[String]] = [[], [""], ["a"], ["a", "b"], ["", "", ""], ["10.0.0.2:7: refused", "é; ü", "日本"]]

    @Test("joinedPlain is joined(separator:)", arguments: lists)
    func joined(list: [String]) {
        #expect(list.joinedPlain(separator: "; ") == list.joined(separator: "; "))
        #expect(list.joinedPlain(separator: "") == list.joined())
    }

    static let texts = ["", ";", "; ", "a; b", "; a;; b; ", "a; a; b", "é; 日本;  x", "no separator", "x;y; z",
                        "abc.held-1700000000", "ab.hel", ".held-.held-2", "e\u{301}; f"]

    @Test("plainRange(of:) finds what firstRange(of:) finds", arguments: texts)
    func range(text: String) {
        for needle in ["; ", ".held-", "a", "日本", "zz"] {
            #expect(text.plainRange(of: needle) == text.firstRange(of: needle), "\(text) / \(needle)")
        }
        #expect(text.plainRange(of: "") == nil)
    }

    @Test("splitPlain is split(separator:omittingEmptySubsequences: true)", arguments: texts)
    func split(text: String) {
        let expected = text.split(separator: "; ", omittingEmptySubsequences: true).map(String.init)
        #expect(text.splitPlain(separator: "; ") == expected)
    }

    @Test("on a substring, the range is in the base string's indices")
    func substring() throws {
        let text = "xx; yy.held-3"
        let tail = text[text.index(text.startIndex, offsetBy: 2)...]
        let range = try #require(tail.plainRange(of: ".held-"))
        #expect(text[range] == ".held-")
        #expect(text[range.upperBound...] == "3")
    }
}
