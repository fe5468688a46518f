/// Every way local state can fail, with what the user can do about it.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var hint: String?
    /// Set only by `ControlClient` when nothing listens at the control socket: a caller may then fall back to the
    /// files. Any other control error (a socket or directory another user owns) must be shown, not worked around.
    public var noDaemon = false

    public init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }

    public var description: String { message }

    public static func io(_ what: String, _ path: String, errno code: Int32) -> StoreError {
        let reason = String(cString: strerror(code))
        var hint: String? = nil
        switch code {
        case ENOSPC, EDQUOT: hint = "free some disk space; nothing was lost, the operation can be retried"
        case EACCES, EPERM: hint = "check the permissions of \(path)"
        case EROFS: hint = "\(path) is on a read-only file system"
        default: break
        }
        return StoreError("cannot \(what) \(path): \(reason)", hint: hint)
    }
}

#if canImport(Glibc)
import Glibc
#endif
