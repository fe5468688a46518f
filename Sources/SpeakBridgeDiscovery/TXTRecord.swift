// DNS-SD TXT records as SpeakBridge uses them (RFC 6763 §6): pure Swift, no avahi.
//
// Encoding checks what the caller hands to the publisher; decoding turns the raw strings of a
// resolved service into a dictionary. avahi itself is only used to move bytes in and out.

/// One validated TXT entry, `key=value`, in the caller's order.
struct TXTEntry: Equatable, Sendable {
    var key: String
    var value: String
}

enum TXTRecord {
    /// Largest single TXT string (one length byte on the wire).
    static let maxEntryBytes = 255

    /// Validates `pairs` for publishing, keeping their order.
    static func validate(_ pairs: [(String, String)]) throws(DiscoveryError) -> [TXTEntry] {
        var seen = Set<String>()
        var entries: [TXTEntry] = []
        for (key, value) in pairs {
            guard !key.isEmpty else { throw .invalidTXT("empty key") }
            // printable US-ASCII except '=' (RFC 6763 §6.4)
            guard key.utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "=") }) else {
                throw .invalidTXT("key \"\(key)\" must be printable ASCII without '='")
            }
            guard seen.insert(key.lowercased()).inserted else {
                throw .invalidTXT("key \"\(key)\" appears more than once")
            }
            let size = key.utf8.count + 1 + value.utf8.count
            guard size <= maxEntryBytes else {
                throw .invalidTXT("\(key)=… is \(size) bytes, more than \(maxEntryBytes)")
            }
            entries.append(TXTEntry(key: key, value: value))
        }
        return entries
    }

    /// Decodes raw TXT strings, in wire order, into a dictionary: keys lowercased, the first
    /// occurrence of a key wins, an entry without `=` is a boolean attribute with value "",
    /// empty strings and entries with an empty key are ignored. Values are decoded as UTF-8;
    /// invalid sequences become U+FFFD.
    static func decode(_ strings: [[UInt8]]) -> [String: String] {
        var result: [String: String] = [:]
        for bytes in strings where !bytes.isEmpty {
            let keyBytes: ArraySlice<UInt8>
            let valueBytes: ArraySlice<UInt8>
            if let eq = bytes.firstIndex(of: UInt8(ascii: "=")) {
                keyBytes = bytes[..<eq]
                valueBytes = bytes[(eq + 1)...]
            } else {
                keyBytes = bytes[...]
                valueBytes = []
            }
            guard !keyBytes.isEmpty else { continue }
            let key = String(decoding: keyBytes, as: UTF8.self).lowercased()
            if result[key] == nil {
                result[key] = String(decoding: valueBytes, as: UTF8.self)
            }
        }
        return result
    }
}
