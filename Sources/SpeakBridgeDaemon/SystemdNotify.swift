#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeSupport

/// sd_notify(3) without libsystemd: one datagram to `$NOTIFY_SOCKET` (a path, or `@name` in the abstract
/// namespace). Lets a `Type=notify` unit know the daemon is listening. A no-op outside systemd.
public enum SystemdNotify {
    @discardableResult
    public static func send(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let abstract = path.hasPrefix("@")
        guard let address = UnixAddress(abstract ? String(path.dropFirst()) : path, abstract: abstract) else {
            return false
        }
        let message = Array(state.utf8)
        let sent = address.withSockaddr { sa, length in
            message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
        }
        return sent == message.count
    }
}
