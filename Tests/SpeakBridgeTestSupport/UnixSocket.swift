#if canImport(Glibc)
import Glibc
#endif

/// Test helper: a Unix socket bound at a path (a notify socket, an impostor daemon, a socket planted where a tool
/// would connect). Returns the descriptor, or -1 with errno set when socket(2) or bind(2) failed (the socket is then
/// closed). The path must fit `sun_path` (107 bytes).
public func boundUnixSocket(at path: String, type: Int32 = Int32(SOCK_STREAM.rawValue)) -> Int32 {
    let fd = socket(AF_UNIX, type, 0)
    guard fd >= 0 else { return -1 }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(fd)
        errno = ENAMETOOLONG
        return -1
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, byte) in bytes.enumerated() { raw[i] = byte }
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        let saved = errno
        close(fd)
        errno = saved
        return -1
    }
    return fd
}
