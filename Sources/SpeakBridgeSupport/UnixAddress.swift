#if canImport(Glibc)
import Glibc
#endif

/// A Unix socket address for a path, or for an abstract name (Linux: the name after a leading NUL, which no file
/// holds), with its exact length: the one place a `sockaddr_un` is filled by hand for a connect or a send.
public struct UnixAddress {
    private var address = sockaddr_un()
    public let length: socklen_t

    /// Nil when the name does not fit `sun_path` (with its terminating NUL, for a path).
    public init?(_ name: String, abstract: Bool = false) {
        let bytes = (abstract ? [0] : []) + Array(name.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        // An abstract name's length is exact; a path's counts its NUL.
        length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
    }

    /// Why unsafe: the socket calls take the generic sockaddr view of the sockaddr_un filled above.
    public func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// A new stream socket (close-on-exec) connected here; nil (errno set) when it could not be made or connected.
    public func connectedStream() -> Int32? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard withSockaddr({ Glibc.connect(fd, $0, $1) }) == 0 else {
            let code = errno
            close(fd)
            errno = code
            return nil
        }
        return fd
    }
}
