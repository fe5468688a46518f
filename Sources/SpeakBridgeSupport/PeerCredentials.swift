#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a connected Unix socket (SO_PEERCRED: the process that made its end, as it was then).
public enum PeerCredentials {
    /// The peer's pid and uid; nil (errno set) when the socket cannot tell (not a Unix socket, not connected).
    /// struct ucred { pid_t pid; uid_t uid; gid_t gid; } (three 32-bit fields) is hidden behind _GNU_SOURCE in the
    /// Glibc module, so it is read as three UInt32s; getsockopt reports how many bytes it wrote.
    public static func of(_ fd: Int32) -> (pid: Int32, uid: uid_t)? {
        var cred: [UInt32] = [0, 0, 0]
        var size = socklen_t(12)
        let rc = cred.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, $0.baseAddress, &size) }
        guard rc == 0, size == 12 else { return nil }
        return (Int32(bitPattern: cred[0]), cred[1])
    }
}
