internal import Glibc
import SpeakBridgeProtocol
internal import SpeakBridgeSupport

/// Runs a helper tool (xclip, xsel, wl-copy, xdotool, …) once, the way selection-owning tools need it.
///
/// Flow: 1. spawn with posix_spawn: stdin = a new pipe (or /dev/null), stdout = /dev/null, stderr = an anonymous
/// memory file (memfd), every other descriptor closed, SIGPIPE/SIGINT/SIGTERM/… back to default, an empty signal
/// mask and its own process group (so a Ctrl-C at the daemon's terminal does not kill the clipboard owner).
/// 2. write the input without blocking past the deadline, then close the pipe so the tool sees end of file.
/// 3. wait for the spawned process only (clipboard tools fork a child that keeps serving the selection and must be
/// left alone), polling waitpid with WNOHANG until the deadline; on timeout SIGKILL that one PID and reap it, so no
/// zombie is left.
/// 4. on failure, read the last 4 KiB of the memfd into the error (escaped: it is shown in `status` and the log;
/// the sinks hide their input in it, see `message(tool:hiding:)`).
///
/// Stderr goes to a memfd, not a pipe: the forked selection owner inherits it, so a pipe would have to be read to
/// end of file (which hangs until the selection changes hands) or closed early (and the owner would die of
/// SIGPIPE at its next message). Stdout is discarded.
///
/// Hand-written rather than swift-subprocess: that API is async-only (the sinks run on blocking threads) and
/// collects output to end of file, which the clipboard tools' selection owner never gives.
enum ToolRunner {
    struct Failure: Error, Equatable {
        enum Reason: Equatable {
            case spawnFailed(errno: Int32)
            case timedOut
            case exited(status: Int32)
            case signaled(signal: Int32)
        }

        var reason: Reason
        /// The end of what the tool wrote to stderr (at most `stderrLimit` bytes), lines joined by "; ",
        /// escaped with `PeerText.escape`; empty when it wrote nothing.
        var stderr: String

        init(_ reason: Reason, stderr: String = "") {
            self.reason = reason
            self.stderr = stderr
        }
    }

    static let stderrLimit = 4096

    /// Runs `executable` with `arguments`; returns normally when it exits with status 0. With `captureStdout`,
    /// stdout goes to a second memfd instead of /dev/null and its first `captureStdout` bytes are returned (for
    /// query tools such as `swaymsg`, never for the clipboard tools, whose selection owner inherits stdout).
    /// With `waylandSocket` (a connection to the compositor, `DisplayProbe.connectWayland`), the tool gets it as
    /// descriptor 3 and `WAYLAND_SOCKET=3`, which libwayland-client's wl_display_connect uses instead of
    /// connecting to WAYLAND_DISPLAY by name: the tool talks to the compositor that was judged, whatever holds
    /// the name by the time it runs. The caller keeps and closes its own descriptor.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], input: [UInt8]?,
                    environment: [String: String], timeout: Duration, captureStdout: Int? = nil,
                    waylandSocket: Int32? = nil) throws(Failure) -> [UInt8] {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)

        var pipeEnds: [Int32] = [-1, -1]
        if input != nil {
            // pipe2 is not visible through Swift's Glibc module; set FD_CLOEXEC right after pipe(). A process
            // forked by another thread in between could inherit the ends, but our own spawns close every
            // descriptor above 2 anyway.
            if pipe(&pipeEnds) != 0 { throw Failure(.spawnFailed(errno: errno)) }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        let errorFile = memfdCreate?("speakbridge-tool-stderr", 1 /* MFD_CLOEXEC */) ?? -1
        defer { if errorFile >= 0 { _ = close(errorFile) } }
        let outputFile = captureStdout == nil ? -1 : memfdCreate?("speakbridge-tool-stdout", 1 /* MFD_CLOEXEC */) ?? -1
        defer { if outputFile >= 0 { _ = close(outputFile) } }
        let pid: pid_t
        do {
            defer { if pipeEnds[0] >= 0 { _ = close(pipeEnds[0]) } }
            pid = try spawn(executable, arguments, stdin: pipeEnds[0], stdout: outputFile, stderr: errorFile,
                            waylandSocket: waylandSocket, environment: environment)
        } catch {
            if pipeEnds[1] >= 0 { _ = close(pipeEnds[1]) }
            throw error
        }
        if let input {
            POSIX.suppressingSIGPIPE { feed(input, to: pipeEnds[1], until: deadline) }
            _ = close(pipeEnds[1])
        }
        let status = waitForExit(pid, until: deadline)
        guard let status else { throw Failure(.timedOut, stderr: tail(of: errorFile)) }
        let signal = status & 0x7f
        if signal != 0 { throw Failure(.signaled(signal: signal), stderr: tail(of: errorFile)) }
        let code = (status >> 8) & 0xff
        if code != 0 { throw Failure(.exited(status: code), stderr: tail(of: errorFile)) }
        guard let limit = captureStdout, outputFile >= 0 else { return [] }
        return head(of: outputFile, limit: limit)
    }

    /// The environment a tool runs with: `base` (the daemon's), plus what the tools need and a bare service
    /// environment may lack.
    /// - A UTF-8 character locale: the input is UTF-8, and xdotool rejects non-ASCII text ("Invalid multi-byte
    ///   sequence") under the C locale. When LC_ALL/LC_CTYPE/LANG (in that order of precedence) do not name a
    ///   UTF-8 locale, LC_ALL=C.UTF-8 is set.
    /// - HOME: xsel refuses to start without it; taken from the password database when absent.
    static func toolEnvironment(_ base: [String: String]) -> [String: String] {
        var environment = base
        let effective = [base["LC_ALL"], base["LC_CTYPE"], base["LANG"]].lazy.compactMap { $0 }.first { !$0.isEmpty } ?? ""
        let normalized = effective.lowercased().filter { $0 != "-" }
        if !normalized.contains("utf8") {
            environment["LC_ALL"] = "C.UTF-8"
        }
        if (environment["HOME"] ?? "").isEmpty, let entry = getpwuid(getuid()), let home = entry.pointee.pw_dir {
            environment["HOME"] = String(cString: home)
        }
        return environment
    }

    /// Finds `name` in the PATH of `environment` (default /usr/local/bin:/usr/bin:/bin); returns its full path.
    static func find(_ name: String, environment: [String: String]) -> String? {
        let searchPath = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in searchPath.split(separator: ":", omittingEmptySubsequences: true) {
            let candidate = "\(directory)/\(name)"
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        return nil
    }

    // MARK: - Steps

    /// The descriptor a tool finds `run`'s `waylandSocket` at.
    static let waylandSocketDescriptor: Int32 = 3

    private static func spawn(_ executable: String, _ arguments: [String], stdin: Int32, stdout: Int32, stderr: Int32,
                              waylandSocket: Int32?, environment: [String: String]) throws(Failure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if stdin >= 0 {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if stdout >= 0 {
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, stderr >= 0 ? stderr : 1, 2)
        var environment = environment
        var firstClosed: Int32 = 3
        if let waylandSocket {
            // dup2 leaves the copy without close-on-exec (glibc ≥ 2.29 clears it also when the descriptor already
            // is 3), so the tool inherits it; libwayland-client sets it close-on-exec again and unsets the variable.
            posix_spawn_file_actions_adddup2(&actions, waylandSocket, waylandSocketDescriptor)
            environment["WAYLAND_SOCKET"] = "\(waylandSocketDescriptor)"
            firstClosed = waylandSocketDescriptor + 1
        } else {
            // One the daemon inherited names a descriptor the tool does not get (closed below).
            environment["WAYLAND_SOCKET"] = nil
        }
        if let addChdir {
            // The tool starts in /, not in the daemon's working directory: a relative name it opens (a file `-`
            // that an older ydotool would read as its text) cannot be one another user planted where the daemon
            // was started.
            _ = addChdir(&actions, "/")
        }
        if let closeFrom = addCloseFrom {
            // Descriptors the daemon opened without O_CLOEXEC (sockets of C libraries) must not live on in the
            // tool's long-lived selection-owner child.
            _ = closeFrom(&actions, firstClosed)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        // Why unsafe: posix_spawn takes NULL-terminated C string arrays; they are strdup'ed here and freed below.
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = toolEnvironment(environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        if result != 0 { throw Failure(.spawnFailed(errno: result)) }
        return pid
    }

    /// Writes `input` to the non-blocking pipe `fd` until done, the reader closes it, or the deadline passes.
    private static func feed(_ input: [UInt8], to fd: Int32, until deadline: ContinuousClock.Instant) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let clock = ContinuousClock()
        var offset = 0
        while offset < input.count {
            let written = input.withUnsafeBytes { bytes in
                write(fd, bytes.baseAddress! + offset, input.count - offset)
            }
            if written > 0 {
                offset += written
                continue
            }
            let err = written < 0 ? errno : EIO
            if err == EINTR { continue }
            guard err == EAGAIN, clock.now < deadline else { return }  // EPIPE: the tool exited early
            _ = POSIX.poll(fd, events: Int16(POLLOUT), timeout: deadline - clock.now)
        }
    }

    /// The raw wait status of `pid`, or nil after killing and reaping it at the deadline.
    private static func waitForExit(_ pid: pid_t, until deadline: ContinuousClock.Instant) -> Int32? {
        let clock = ContinuousClock()
        var pause: Duration = .milliseconds(1)
        while true {
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return status }
            if result < 0 {
                if errno == EINTR { continue }
                // ECHILD: someone else reaped it (SIGCHLD ignored process-wide); its status is unknowable.
                return 0
            }
            if clock.now >= deadline {
                _ = kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                return nil
            }
            POSIX.sleep(min(pause, deadline - clock.now))
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    /// The last `stderrLimit` bytes of the memfd `fd`, as `Failure.stderr` describes them.
    private static func tail(of fd: Int32) -> String {
        var info = stat()
        guard fd >= 0, fstat(fd, &info) == 0, info.st_size > 0 else { return "" }
        let count = Int(min(info.st_size, off_t(stderrLimit)))
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, info.st_size - off_t(count)) }
        guard got > 0 else { return "" }
        let text = String(decoding: bytes[..<got], as: UTF8.self)
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        return PeerText.escape(lines.joined(separator: "; "))
    }

    /// The first `limit` bytes of the memfd `fd` (what a query tool printed).
    private static func head(of fd: Int32, limit: Int) -> [UInt8] {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else { return [] }
        let count = Int(min(info.st_size, off_t(limit)))
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, 0) }
        return got > 0 ? Array(bytes[..<got]) : []
    }

    private typealias MemfdCreate = @convention(c) (UnsafePointer<CChar>?, UInt32) -> Int32

    /// memfd_create (glibc ≥ 2.27) is declared only under _GNU_SOURCE, which Swift's Glibc module does not set;
    /// looked up at run time. Without it stderr goes to /dev/null as before and errors carry no tool text.
    /// Why unsafe: the symbol is cast to its C prototype, `int memfd_create(const char *, unsigned int)`.
    private static let memfdCreate: MemfdCreate? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "memfd_create") else { return nil }
        return unsafeBitCast(symbol, to: MemfdCreate.self)
    }()

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

    /// glibc ≥ 2.29 has posix_spawn_file_actions_addchdir_np, undeclared in Swift's Glibc module: looked up at run
    /// time (nil on older C libraries, where the tool starts in the daemon's directory).
    private static let addChdir: AddChdir? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
            return nil
        }
        return unsafeBitCast(symbol, to: AddChdir.self)
    }()

    /// glibc ≥ 2.34 has posix_spawn_file_actions_addclosefrom_np, but Swift's Glibc module does not declare it;
    /// look it up at run time (nil on older C libraries, where only O_CLOEXEC descriptors are kept from the tool).
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()
}

extension ToolRunner.Failure {
    /// A message naming the tool, ending in what the tool said on stderr:
    /// `xclip failed with exit status 1: xclip: Error: Can't open display: :57`. The tool's input must never be
    /// in it (the message reaches `status` and the log): each of `hiding` (the texts given to the tool) and each
    /// of their lines is cut out of what the tool said, should the tool quote it.
    func message(tool: String, hiding: [String] = []) -> String {
        let what = switch reason {
        case .spawnFailed(let err): "could not start \(tool): \(POSIX.describe(err))"
        case .timedOut: "\(tool) did not finish in time and was stopped"
        case .exited(let status): "\(tool) failed with exit status \(status)"
        case .signaled(let signal): "\(tool) was killed by signal \(signal)"
        }
        var pieces: [String] = []
        for text in hiding {
            pieces.append(text)
            pieces += text.split(whereSeparator: \.isNewline).map { String($0) }
        }
        let secrets: [String] = pieces.map { PeerText.escape(String($0.trimmingWhitespace())) }
        var said = stderr
        for secret in secrets.filter({ $0.count > 2 }).sorted(by: { $0.count > $1.count }) {
            said = said.replacing(secret, with: "[…]")
        }
        guard !said.isEmpty else { return what }
        return what + ": " + (said.hasPrefix(tool + ":") ? said : tool + ": " + said)
    }
}

private extension StringProtocol {
    func trimmingWhitespace() -> SubSequence {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
              let last = lastIndex(where: { !$0.isWhitespace }) else { return self[endIndex...] }
        return self[first...last]
    }
}
