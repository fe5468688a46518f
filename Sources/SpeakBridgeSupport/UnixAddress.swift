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

    /// `connectedStream()` that gives up after `patience` (errno ETIMEDOUT) instead of waiting for as long as the
    /// listener does not accept: a blocking connect(2) to a Unix stream socket whose backlog is full sleeps until
    /// it is accepted, so a wedged listener, or one that binds the name to never accept, would hold the caller
    /// forever. Non-blocking, such a connect fails at once with EAGAIN (it never is "in progress" as TCP's is), and
    /// is tried again every 10 ms. The socket returned is blocking again.
    public func connectedStream(patience: Duration) -> Int32? {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = socket(AF_UNIX, type, 0)
        guard fd >= 0 else { return nil }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        while withSockaddr({ Glibc.connect(fd, $0, $1) }) != 0 {
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN, clock.now < deadline else {
                close(fd)
                errno = code == EAGAIN ? ETIMEDOUT : code
                return nil
            }
            usleep(10_000)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
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
