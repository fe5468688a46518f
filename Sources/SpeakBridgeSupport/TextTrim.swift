/// Trimming white space from both ends of a string, without Foundation: the same scalars Foundation's
/// `CharacterSet.whitespaces` / `.whitespacesAndNewlines` hold (Tests/SpeakBridgeStoreTests/TextTrimTests.swift
/// compares every Unicode scalar against Foundation's sets), trimmed scalar by scalar as `trimmingCharacters(in:)`
/// does.
public enum TextTrim {
    /// Space, tab and the other horizontal spaces (Foundation's `CharacterSet.whitespaces`).
    public static func whitespace(_ text: String) -> String {
        trim(text, where: isHorizontalSpace)
    }

    /// Horizontal spaces and line and paragraph breaks (Foundation's `CharacterSet.whitespacesAndNewlines`).
    public static func whitespaceAndNewlines(_ text: String) -> String {
        trim(text) { isHorizontalSpace($0) || isLineBreak($0) }
    }

    static func isHorizontalSpace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x20, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: return true
        default: return false
        }
    }

    static func isLineBreak(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A...0x0D, 0x85, 0x2028, 0x2029: return true
        default: return false
        }
    }

    private static func trim(_ text: String, where matches: (Unicode.Scalar) -> Bool) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !matches($0) }),
              let last = scalars.lastIndex(where: { !matches($0) }) else { return "" }
        return String(scalars[first...last])
    }
}
