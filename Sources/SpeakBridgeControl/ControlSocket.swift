#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

/// The local control channel between the CLI and the running daemon: a Unix stream socket `run/control.sock`
/// (mode 0600, in a 0700 directory). One request per connection: the client writes one JSON object and a
/// newline (`ControlRequest`), the daemon answers one JSON object and a newline (`ControlReply`), then closes.
///
/// Trust: whoever can replace `control.sock` can show the user their own pairing code and swallow `revoke`. So
/// the server binds only in a directory that passes `PrivatePath.checkDirectory` and removes a stale socket only
/// if it is a socket of ours; the client (`ControlClient`) checks the directory, that the path is a socket it
/// owns (lstat), and after connecting that the listening process runs as the same user (SO_PEERCRED).
/// The other way round, whoever can connect can pair a device, revoke every device and read the status. The
/// 0600 socket in its 0700 directory keeps other users out only as long as nobody loosens those modes (a
/// `chmod` by hand, a runtime directory another tool made 0755, a bind mount), so the server itself serves only
/// a process of this user or root: it asks the kernel who connected (SO_PEERCRED) before reading a byte, and
/// closes any other connection unanswered, with a log line (`ControlRefusals`: at most one in 10 s).
// `@unchecked Sendable` is sound: `isStopped` is guarded by `stopped`; `refusals` is a `Locked`; the other fields
// are set once in init.
public final class ControlServer: @unchecked Sendable {
    public typealias Handler = @Sendable (JSONValue) -> JSONValue
    struct HandlerBox: Sendable { let handle: Handler }

    let path: String
    let listenFD: Int32
    let handler: HandlerBox
    let stopped = ThreadLock()
    var isStopped = false
    let refusals = Locked(ControlRefusals())

    /// Answers each well-formed request with `handler`'s reply; anything else with a `ControlFailure`.
    public convenience init(path: String, typed handler: @escaping @Sendable (ControlRequest) -> ControlReply) throws(StoreError) {
        try self.init(path: path) { json in
            do throws(ControlFailure) {
                return handler(try ControlRequest(json: json)).json
            } catch {
                return error.json
            }
        }
    }

    /// Answers each request (any JSON) with `handler`'s JSON.
    public init(path: String, handler: @escaping Handler) throws(StoreError) {
        self.path = path
        self.handler = HandlerBox(handle: handler)
        let address = try ControlClient.address(path)
        try PrivatePath.checkDirectory(ControlClient.directory(of: path))
        // A socket file left by a killed daemon: remove it only if it is our socket and nobody answers on it.
        switch try ControlClient.inspect(path) {
        case .absent:
            break
        case .ourSocket:
            if ControlClient.isAlive(path: path) {
                throw StoreError("another speakbridge daemon is already running for this home (\(path))",
                                 hint: "stop it first, or use a different --home")
            }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .io("create socket", path, errno: errno) }
        let old = umask(0o177)
        let rc = address.withSockaddr { bind(fd, $0, $1) }
        umask(old)
        guard rc == 0, listen(fd, 16) == 0 else {
            let code = errno
            close(fd)
            throw .io("listen on", path, errno: code)
        }
        chmod(path, 0o600)
        listenFD = fd
        Threads.start(name: "sb-control") { [self] in acceptLoop() }
    }

    public func stop() {
        let first = stopped.withLock { () -> Bool in
            defer { isStopped = true }
            return !isStopped
        }
        guard first else { return }
        shutdown(listenFD, Int32(SHUT_RDWR))
        unlink(path)
    }

    func acceptLoop() {
        while true {
            let client = accept(listenFD, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                if stopped.withLock({ isStopped }) { close(listenFD); return }
                usleep(10_000)
                continue
            }
            guard admits(client) else {
                close(client)
                continue
            }
            let handler = self.handler
            Threads.start {
                ControlClient.setTimeout(client, seconds: 5)
                defer { close(client) }
                guard let line = ControlClient.readLine(client) else { return }  // a liveness probe, or gone
                guard let request = try? JSONValue.parse(line) else {
                    ControlClient.sendAll(client, ControlFailure("malformed request").json.encoded() + [0x0A])
                    return
                }
                ControlClient.sendAll(client, handler.handle(request).encoded() + [0x0A])
            }
        }
    }

    /// Whether the process at the other end of `client` may be served: it runs as this user or as root
    /// (SO_PEERCRED, the credentials it had when it connected). Checked on the accept thread, before a thread is
    /// started or a byte read, so another user's connections cost no more than the accept and this call. A
    /// refusal is logged (throttled by `refusals`).
    func admits(_ client: Int32) -> Bool {
        let credentials = PeerCredentials.of(client)
        let error = errno
        if let credentials, credentials.uid == geteuid() || credentials.uid == 0 { return true }
        let now = ThreadCondition.monotonicNanoseconds
        if let unlogged = refusals.withLock({ $0.admit(now: now) }) {
            Console.warning(ControlRefusals.line(path: path, credentials: credentials, error: error, unlogged: unlogged))
        }
        return false
    }
}

public enum ControlClient {
    /// Asks the daemon of `home` and decodes its answer as `Reply`: a transport problem throws
    /// `ControlError.transport` (with `noDaemon` set when none runs), a refusal `ControlError.refused`.
    public static func ask<Reply: ControlReplyDecodable>(_ request: ControlRequest, home: Home, timeout: Int = 10,
                                                        as: Reply.Type = Reply.self) throws(ControlError) -> Reply {
        let json: JSONValue
        do {
            json = try Self.request(home: home, request.json, timeout: timeout)
        } catch {
            throw .transport(error)
        }
        do {
            return try Reply(json: json)
        } catch {
            throw .refused(error)
        }
    }

    /// Sends one request to the daemon of `home` and returns its answer. Talks only to a daemon of this user:
    /// the runtime directory must be private, `control.sock` a socket we own, and its listener our uid.
    public static func request(home: Home, _ request: JSONValue, timeout: Int = 10) throws(StoreError) -> JSONValue {
        let path = home.controlSocket
        var noDaemon = StoreError("no speakbridge daemon is running for this home (\(path))",
                                  hint: "start it with `speakbridge serve` (same --home)")
        noDaemon.noDaemon = true
        let address = try address(path)
        var info = stat()
        if lstat(directory(of: path), &info) != 0 && errno == ENOENT { throw noDaemon }
        try PrivatePath.checkDirectory(directory(of: path))
        guard case .ourSocket = try inspect(path) else { throw noDaemon }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .io("create socket", path, errno: errno) }
        defer { close(fd) }
        guard address.withSockaddr({ connect(fd, $0, $1) }) == 0 else { throw noDaemon }
        try checkPeer(fd, path: path)
        setTimeout(fd, seconds: timeout)
        sendAll(fd, request.encoded() + [0x0A])
        guard let line = readLine(fd), let reply = try? JSONValue.parse(line, maxDepth: 16, maxBytes: 1 << 22) else {
            throw StoreError("the daemon did not answer on \(path)", hint: "check the daemon's log")
        }
        return reply
    }

    enum Existing { case absent, ourSocket }

    /// What is at the socket path, examined without following a symlink: nothing, or a socket this user owns.
    /// Anything else is an error that says what is wrong.
    static func inspect(_ path: String) throws(StoreError) -> Existing {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .absent }
            throw .io("inspect", path, errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw StoreError("\(path) is not a socket", hint: "remove it (`rm \(path)`); the daemon creates its own socket")
        }
        guard info.st_uid == geteuid() else {
            throw PrivatePath.ownedByOther(path, uid: info.st_uid, what: "is a socket")
        }
        return .ourSocket
    }

    /// The process listening on a connected socket must run as this very user: closes the gap between the
    /// lstat checks and connect(2), and catches a listener that is not ours whatever the file system says.
    static func checkPeer(_ fd: Int32, path: String) throws(StoreError) {
        guard let (pid, uid) = PeerCredentials.of(fd) else { throw .io("identify the daemon on", path, errno: errno) }
        guard uid == geteuid() else {
            throw StoreError("the process listening on \(path) runs as another user (uid \(uid), pid \(pid))",
                             hint: "do not trust what it says; stop it, remove the socket and start `speakbridge serve` yourself")
        }
    }

    static func directory(of path: String) -> String {
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return dir.isEmpty ? "/" : dir
    }

    public static func isAlive(path: String) -> Bool {
        guard let fd = (try? address(path))?.connectedStream() else { return false }
        close(fd)
        return true
    }

    /// The socket's address (`UnixAddress`), or an error that says how to shorten a path too long for one.
    static func address(_ path: String) throws(StoreError) -> UnixAddress {
        guard let address = UnixAddress(path) else {
            let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
            throw StoreError("the control socket path is \(path.utf8.count) bytes, longer than the \(capacity - 1) a "
                             + "Unix socket allows: \(path)",
                             hint: "use a shorter --home, or set XDG_RUNTIME_DIR to a short private directory")
        }
        return address
    }

    /// Writes on a socket without raising SIGPIPE if the peer has gone (MSG_NOSIGNAL).
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    static func setTimeout(_ fd: Int32, seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    static func readLine(_ fd: Int32) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.count < 1 << 22 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
            if let nl = out.firstIndex(of: 0x0A) { return Array(out[..<nl]) }
        }
        return out.isEmpty ? nil : out
    }
}
