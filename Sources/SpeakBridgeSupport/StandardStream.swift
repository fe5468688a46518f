#if canImport(Glibc)
import Glibc
#endif

/// Whole writes to a descriptor the program does not own (stdout, stderr): best effort, one call per record.
public enum StandardStream {
    /// Writes all of `bytes` to `fd`, retrying on EINTR and short writes; false when the descriptor fails
    /// (a closed terminal, a full pipe in non-blocking mode): there is nobody left to tell.
    @discardableResult
    public static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }
}
