#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeProtocol

extension OutboxShelf {
    /// Whether the outbox directory holds a file named like a held journal of `desktop`
    /// (`<ID>.held-<TIME>.journal`): names only, nothing opened or parsed. `send` asks this at start and counts the
    /// held lines (`heldCount`, which reads every journal of the directory, the live one too) only when it is true;
    /// false means `heldCount` would be 0. An unreadable directory answers true (then `heldCount` decides, as before).
    public static func mayHoldLines(home: Home, desktop: DeviceID) -> Bool {
        guard let dir = opendir(home.outboxDirectory) else { return true }
        defer { closedir(dir) }
        let prefix = Array((desktop.compact + heldMarker).utf8)
        let ending = Array(suffix.utf8)
        while let entry = readdir(dir) {
            let matches = withUnsafeBytes(of: entry.pointee.d_name) { raw -> Bool in
                let length = raw.firstIndex(of: 0) ?? raw.count
                let name = raw[..<length]
                return name.count >= prefix.count + ending.count && name.starts(with: prefix)
                    && name.suffix(ending.count).elementsEqual(ending)
            }
            if matches { return true }
        }
        return false
    }
}
