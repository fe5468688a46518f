internal import Glibc
internal import SpeakBridgeSupport

/// Writes each text and "\n" into a named pipe that an editor (or `cat`) reads.
///
/// Flow:
/// 1. `init` creates the FIFO with mode 0600 if the path does not exist (the directory must exist, be ours and not
///    writable by others); a path that exists and is not a FIFO is an error, and so is a FIFO another user owns or
///    that group or others may open (they would read the dictation) and a symlink (never followed).
/// 2. The write end is opened lazily with O_WRONLY|O_NONBLOCK|O_NOFOLLOW, and the opened descriptor is checked
///    again (fstat: a FIFO, ours, 0600), so a FIFO swapped in after step 1 is refused too. ENXIO means no reader: `waitUntilReady` then checks
///    again every 20 ms (sleeping in between, never spinning) until a reader opens the FIFO or the timeout ends.
/// 3. Once open, the write end stays open for the sink's lifetime, even while no reader is attached. The kernel
///    keeps a pipe's buffered bytes as long as any end is open, so text already written but not yet read when a
///    reader closes is kept and handed to the next reader, in order. (Closing the write end on EPIPE would silently
///    drop those bytes although `willComplete` already counted them.)
/// 4. Writes are at most PIPE_BUF (4096) bytes, so each is all-or-nothing, and never block (O_NONBLOCK, no poll
///    first: one syscall per write less); a full pipe (EAGAIN) or a missing reader (EPIPE) ends the
///    `deliver` call with a `SinkError` whose `delivered` counts whole texts written, and `waitUntilReady` waits
///    for room or for a reader.
/// 5. A text longer than PIPE_BUF bytes is written in PIPE_BUF pieces. If the pipe fills up or the reader goes
///    away between two pieces, the sink remembers how much of that text it wrote; when the next `deliver` starts
///    with the same text (as the daemon's retry does) it writes only the rest, so the reader gets it exactly once.
///    Edge: a reader that closes between two pieces and a new one that opens later each see part of that text;
///    and if the next `deliver` starts with a different text, the cut-off text stays cut off.
/// 6. If the path is removed or replaced while no reader is attached, the sink drops its old pipe (and with it any
///    unread bytes), recreates the FIFO if needed and waits for a reader of the new one.
///
/// What no writer can guarantee: bytes a reader has already read into its own buffer but not used when it exits
/// are gone. `close` closes the write end: a reader then reads what is left and sees end of file. The FIFO itself
/// is left in place.
public final class FIFOSink: TextSink {
    public let path: String
    public let label: String
    private let sanitize: Bool

    private struct Partial: Sendable {
        var frame: [UInt8]
        var written: Int
    }
    private struct State: Sendable {
        var fd: Int32 = -1
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var closed = false
        var partial: Partial?
    }
    private enum Readiness {
        case ready, noReader, full
        case failed(String)
    }
    private let state = Locked(State())

    /// How often `waitUntilReady` looks for a reader while there is none.
    static let readerCheckInterval: Duration = .milliseconds(20)
    /// Longest time the lock is held while polling, so `close` and `health` never wait long.
    static let lockedPollSlice: Duration = .milliseconds(100)

    /// Creates the FIFO at `path` (mode 0600) unless it exists; does not open it yet.
    /// - Parameter sanitize: run texts through `OutputSanitizer` (false = `--raw`).
    public convenience init(path: String, sanitize: Bool = true) throws(SinkError) {
        try self.init(path: path, sanitize: sanitize, label: "fifo:\(path)")
    }

    /// The same FIFO rules under another label (the framed `jsonl:` sink writes through one of these).
    init(path: String, sanitize: Bool, label: String) throws(SinkError) {
        try Self.prepare(path)
        self.path = path
        self.label = label
        self.sanitize = sanitize
    }

    // MARK: - Sink

    public var health: String? {
        switch state.withLock({ check(&$0, wait: .zero) }) {
        case .ready: nil
        case .noReader: noReaderReason
        case .full: fullReason
        case .failed(let reason): reason
        }
    }

    public func waitUntilReady(timeout: Duration) -> String? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let slice = min(deadline - clock.now, Self.lockedPollSlice)
            let readiness = state.withLock { check(&$0, wait: slice) }
            let reason: String
            switch readiness {
            case .ready: return nil
            case .failed(let failure): return failure
            case .full: reason = fullReason
            case .noReader: reason = noReaderReason
            }
            let remaining = deadline - clock.now
            if remaining <= .zero { return reason }
            if case .noReader = readiness {
                POSIX.sleep(min(remaining, Self.readerCheckInterval))
            }
        }
    }

    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        try write(LineFraming.plan(texts, sanitize: sanitize, limit: Int(PIPE_BUF)), willWrite: willComplete,
                  didWrite: { _ in })
    }

    /// The items' texts framed straight from the items (no array of texts in between); otherwise what
    /// `TextSink`'s `deliver` does: class (a), `willWrite` before the write that completes a text.
    public func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void,
                        didWrite: (Int) -> Void) throws(SinkError) {
        if items.count == 1, try writeAlone(items[0], willWrite: willWrite) {
            didWrite(1)
            return
        }
        try write(LineFraming.plan(items: items, sanitize: sanitize, limit: Int(PIPE_BUF)),
                  willWrite: willWrite, didWrite: { _ in })
        didWrite(items.count)
    }

    /// One text (every paced line) of less than PIPE_BUF bytes that needs no sanitizing, written with its "\n" by
    /// one writev(2) straight from the text's bytes: no plan (two arrays) in between. The same bytes, progress
    /// contract and errors as the plan path, which takes everything else (false: not such a text, or the rest of
    /// a cut-off earlier text is pending).
    private func writeAlone(_ item: SinkItem, willWrite: (Int) throws -> Void) throws(SinkError) -> Bool {
        // The item's bytes in place: its frame's, or its string's storage (no copy for a native string).
        let outcome: Result<Bool, SinkError> = item.withTextUTF8 { bytes in
            guard bytes.count < Int(PIPE_BUF), !sanitize || LineFraming.isPlain(bytes[...]) else {
                return .success(false)
            }
            do throws(SinkError) {
                return .success(try POSIX.suppressingSIGPIPE { () throws(SinkError) -> Bool in
                    try state.withLock { (current) throws(SinkError) -> Bool in
                        guard current.partial == nil else { return false }
                        try writeAlone(bytes, state: &current, willComplete: willWrite)
                        return true
                    }
                })
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Writes ready-made frames (one per item, each ending in "\n") with the `Sink` progress contract.
    func write(_ frames: [[UInt8]], willWrite: (Int) throws -> Void, didWrite: (Int) -> Void) throws(SinkError) {
        try write(ChunkPlan(frames: frames, limit: Int(PIPE_BUF)), willWrite: willWrite, didWrite: didWrite)
    }

    /// Writes a laid-out plan (one frame per item) with the `Sink` progress contract.
    func write(_ plan: ChunkPlan, willWrite: (Int) throws -> Void, didWrite: (Int) -> Void) throws(SinkError) {
        guard plan.count > 0 else { return }
        try POSIX.suppressingSIGPIPE { () throws(SinkError) in
            try state.withLock { (current) throws(SinkError) in
                try deliver(plan, state: &current, willComplete: willWrite, didWrite: didWrite)
            }
        }
    }

    public func close() {
        state.withLock { current in
            current.closed = true
            if current.fd >= 0 {
                _ = Glibc.close(current.fd)
                current.fd = -1
            }
            current.partial = nil
        }
    }

    deinit {
        close()
    }

    // MARK: - Writing

    /// Refuses a closed sink; opens the write end when it is not open (a pipe without reader is an error here).
    private func prepareToWrite(_ current: inout State) throws(SinkError) {
        if current.closed { throw SinkError(message: "\(label) sink is closed") }
        if current.fd < 0 {
            switch open(&current) {
            case .ready, .full: break
            case .noReader: throw SinkError(message: HeldReason.Marker.noReader + path, hint: noReaderHint)
            case .failed(let reason): throw SinkError(message: reason)
            }
        }
    }

    /// Writes the "\n" that ends a cut-off text whose rest will not be written; a full pipe keeps `partial` for
    /// the next try.
    private func endTornLine(_ current: inout State, _ partial: Partial) throws(SinkError) {
        var newline: UInt8 = 0x0A
        while true {
            let written = Glibc.write(current.fd, &newline, 1)
            if written == 1 { return }
            let err = written < 0 ? errno : EIO
            if err == EINTR { continue }
            if err == EAGAIN { current.partial = partial }
            let failure = writeFailure(err)
            throw SinkError(delivered: 0, message: failure.message, hint: failure.hint, waitsForRoom: err == EAGAIN)
        }
    }

    /// What a failed write's errno means (EINTR is retried by the caller).
    private func writeFailure(_ err: Int32) -> (message: String, hint: String?) {
        switch err {
        case EAGAIN: (fullReason, nil)
        case EPIPE: (HeldReason.Marker.noReader + path, noReaderHint)
        default: ("writing to FIFO \(path) failed: \(POSIX.describe(err))", nil)
        }
    }

    /// `writeAlone`'s write: `bytes` (< PIPE_BUF) and "\n" in one writev(2), all or nothing as one write(2) of
    /// their length would be; `willComplete(1)` right before it, as the plan path does for a one-frame plan.
    private func writeAlone(_ bytes: UnsafeBufferPointer<UInt8>, state current: inout State,
                            willComplete: (Int) throws -> Void) throws(SinkError) {
        try prepareToWrite(&current)
        do { try willComplete(1) } catch {
            throw SinkError(delivered: 0, message: "could not record progress: \(error)")
        }
        var newline: UInt8 = 0x0A
        while true {
            let written = withUnsafeMutablePointer(to: &newline) { end in
                // writev only reads through these pointers (iovec's field is mutable only by its C type).
                let text = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
                var pieces = (iovec(iov_base: text, iov_len: bytes.count),
                              iovec(iov_base: UnsafeMutableRawPointer(end), iov_len: 1))
                return withUnsafeMutableBytes(of: &pieces) { raw in
                    writev(current.fd, raw.baseAddress!.assumingMemoryBound(to: iovec.self), 2)
                }
            }
            if written > 0 { return }  // == bytes.count + 1: a write of at most PIPE_BUF bytes is atomic
            let err = written < 0 ? errno : EIO
            if err == EINTR { continue }
            let failure = writeFailure(err)
            throw SinkError(delivered: 0, message: failure.message, hint: failure.hint, waitsForRoom: err == EAGAIN)
        }
    }

    private func deliver(_ plan: ChunkPlan, state current: inout State,
                         willComplete: (Int) throws -> Void, didWrite: (Int) -> Void) throws(SinkError) {
        try prepareToWrite(&current)
        var position = 0
        if let partial = current.partial {
            current.partial = nil
            if partial.frame[...] == plan.frame(0) {
                position = partial.written
            } else {
                // The rest of a cut-off text is not coming (its device was revoked meanwhile): its line is ended
                // first, so that the next text does not continue it on the reader's side.
                try endTornLine(&current, partial)
            }
        }
        var reported = 0
        var confirmed = 0
        var failure: (message: String, hint: String?)?
        var full = false
        writing: while position < plan.stream.count {
            let (range, completes) = plan.chunk(from: position)
            // No poll(2) for room first (one syscall per line less): the descriptor is non-blocking, so a full pipe
            // answers EAGAIN and a pipe without reader EPIPE, and a write of at most PIPE_BUF bytes is all or
            // nothing. A failed write after `willComplete` is rolled back by the caller (`Sink` contract).
            if completes > reported {
                do { try willComplete(completes) } catch {
                    failure = ("could not record progress: \(error)", nil)
                    break writing
                }
                reported = completes
            }
            while true {
                let written = plan.stream.withUnsafeBytes { bytes in
                    Glibc.write(current.fd, bytes.baseAddress! + range.lowerBound, range.count)
                }
                if written > 0 {
                    position += written  // == range.count: a write of at most PIPE_BUF bytes is atomic
                    let done = plan.completed(at: position)
                    if done > confirmed {
                        confirmed = done
                        didWrite(done)
                    }
                    continue writing
                }
                let err = written < 0 ? errno : EIO
                if err == EINTR { continue }
                failure = writeFailure(err)
                full = err == EAGAIN
                break writing
            }
        }
        guard let failure else { return }
        let delivered = plan.completed(at: position)
        let frameStart = plan.start(ofFrame: delivered)
        if delivered < plan.count, position > frameStart {
            current.partial = Partial(frame: Array(plan.frame(delivered)), written: position - frameStart)
        }
        throw SinkError(delivered: delivered, message: failure.message, hint: failure.hint, waitsForRoom: full)
    }

    // MARK: - Readiness

    private var noReaderHint: String { "open it with `cat \(path)`" }
    private var noReaderReason: String { "no reader on FIFO \(path): \(noReaderHint)" }
    private var fullReason: String { "FIFO \(path) is full: its reader is not reading" }

    /// Opens the write end if needed and polls it for at most `wait`.
    private func check(_ current: inout State, wait: Duration) -> Readiness {
        if current.closed { return .failed("\(label) sink is closed") }
        if current.fd < 0 {
            let opened = open(&current)
            guard case .ready = opened else { return opened }
        }
        let events = POSIX.poll(current.fd, events: Int16(POLLOUT), timeout: wait)
        if events & Int16(POLLERR | POLLNVAL) != 0 {
            // No reader right now. Keep the pipe (and its unread bytes) unless the path no longer leads to it.
            if !pathLeadsToOpenPipe(current) {
                _ = Glibc.close(current.fd)
                current.fd = -1
                current.partial = nil
            }
            return .noReader
        }
        return events & Int16(POLLOUT) != 0 ? .ready : .full
    }

    /// Tries to open the write end without blocking: `.ready` when opened, `.noReader` on ENXIO.
    private func open(_ current: inout State) -> Readiness {
        while true {
            let fd = Glibc.open(path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                var info = stat()
                guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFIFO else {
                    _ = Glibc.close(fd)
                    return .failed("\(path) is no longer a FIFO")
                }
                if let problem = Ownership.fifoProblem(info, path: path) {
                    _ = Glibc.close(fd)
                    return .failed(problem.message)
                }
                current.fd = fd
                current.device = UInt64(info.st_dev)
                current.inode = UInt64(info.st_ino)
                return .ready
            }
            let err = errno
            switch err {
            case EINTR:
                continue
            case ENXIO:
                // No reader yet, but still refuse a FIFO that is not ours before waiting for its reader.
                if let problem = Self.inspect(path) { return .failed(problem.message) }
                return .noReader
            case ELOOP:
                return .failed(Self.symlinkRefused(path).message)
            case ENOENT:
                // Removed since init: make it again; a fresh FIFO has no reader yet.
                do { try Self.prepare(path) } catch { return .failed(error.message) }
                return .noReader
            default:
                return .failed("cannot open FIFO \(path): \(POSIX.describe(err))")
            }
        }
    }

    private func pathLeadsToOpenPipe(_ current: State) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return UInt64(info.st_dev) == current.device && UInt64(info.st_ino) == current.inode
    }

    /// What is wrong with an existing FIFO path (lstat: a symlink is not followed), or nil if it is a FIFO of ours
    /// that nobody else may open, or if nothing is there.
    static func inspect(_ path: String) -> SinkError? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFIFO: return Ownership.fifoProblem(info, path: path)
        case S_IFLNK: return symlinkRefused(path)
        default:
            return SinkError(message: "\(path) exists and is not a FIFO",
                             hint: "remove it or choose another path for the fifo sink")
        }
    }

    static func symlinkRefused(_ path: String) -> SinkError {
        SinkError(message: "FIFO path \(path) is a symbolic link; the fifo sink does not follow links",
                  hint: "give the FIFO's real path, or remove the link (`rm \(path)`) if you did not create it")
    }

    /// Makes sure `path` is a FIFO of ours (see `inspect`), creating it with mode 0600 when absent, in a directory
    /// that is ours and not writable by others.
    static func prepare(_ path: String) throws(SinkError) {
        var info = stat()
        for _ in 0..<2 {
            if lstat(path, &info) == 0 {
                if let problem = inspect(path) { throw problem }
                return
            }
            let statError = errno
            guard statError == ENOENT else {
                throw SinkError(message: "cannot use FIFO \(path): \(POSIX.describe(statError))")
            }
            if let problem = Ownership.directoryProblem(Ownership.directory(of: path)) { throw problem }
            if mkfifo(path, 0o600) == 0 {
                // mkfifo applies the umask; make the mode exactly 0600 whatever the umask is.
                _ = chmod(path, 0o600)
                return
            }
            let err = errno
            switch err {
            case EEXIST:
                continue  // created by someone else in between: check what it is
            case ENOENT, ENOTDIR:
                throw SinkError(message: "cannot create FIFO \(path): its directory does not exist",
                                hint: "create the directory first, or choose another path")
            case EACCES, EPERM, EROFS:
                throw SinkError(message: "cannot create FIFO \(path): \(POSIX.describe(err))",
                                hint: "choose a path in a directory you can write to, e.g. under $XDG_RUNTIME_DIR")
            default:
                throw SinkError(message: "cannot create FIFO \(path): \(POSIX.describe(err))")
            }
        }
        throw SinkError(message: "cannot create FIFO \(path): the path keeps changing")
    }
}
