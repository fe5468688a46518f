// Small POSIX helpers shared by the sinks: errno text, time budgets, poll, SIGPIPE suppression, framing.
internal import Glibc

enum POSIX {
    /// The C library's text for `err`, e.g. "Broken pipe".
    static func describe(_ err: Int32) -> String {
        String(cString: strerror(err))
    }

    /// `duration` as poll(2) milliseconds, rounded up so a short positive wait never becomes a busy loop.
    static func milliseconds(_ duration: Duration) -> Int32 {
        if duration <= .zero { return 0 }
        let (seconds, attoseconds) = duration.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    /// Polls one descriptor, retrying on EINTR with the remaining time. Returns revents (0 on timeout).
    static func poll(_ fd: Int32, events: Int16, timeout: Duration) -> Int16 {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = Glibc.poll(&entry, 1, milliseconds(deadline - clock.now))
            if ready > 0 { return entry.revents }
            if ready == 0 { return 0 }
            if errno != EINTR { return Int16(POLLERR) }
        }
    }

    /// Sleeps for `duration` (no busy waiting); an interrupted sleep just ends early.
    static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        _ = nanosleep(&request, nil)
    }

    /// Whether SIGPIPE was ignored process-wide when a sink first wrote (read once: one rt_sigaction(2)). Only
    /// a true answer skips the masking, and nothing in this program turns an ignored SIGPIPE back on.
    static let pipeSignalIgnored: Bool = {
        var current = sigaction()
        guard sigaction(SIGPIPE, nil, &current) == 0 else { return false }
        // Function pointers compare by address: SIG_IGN is the constant 1 cast to a handler.
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }()

    /// Runs `body` with SIGPIPE blocked on this thread, and discards a SIGPIPE that `body` raised.
    ///
    /// Writing to a pipe without readers raises SIGPIPE, which kills the process unless it is ignored. The daemon
    /// ignores it process-wide; this makes the sinks safe even where that was forgotten (tests, other hosts).
    /// A SIGPIPE that was already pending before `body` is left alone.
    static func suppressingSIGPIPE<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        // The daemon ignores SIGPIPE for the whole process before any sink exists, and nothing restores it: then
        // a write to a pipe without readers just fails with EPIPE, and the four signal-mask calls per write are
        // not needed.
        if pipeSignalIgnored { return try body() }
        var pipeOnly = sigset_t()
        sigemptyset(&pipeOnly)
        sigaddset(&pipeOnly, SIGPIPE)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeOnly, &previousMask)
        var pendingBefore = sigset_t()
        sigpending(&pendingBefore)
        let wasPending = sigismember(&pendingBefore, SIGPIPE) == 1
        defer {
            var pending = sigset_t()
            sigpending(&pending)
            if !wasPending, sigismember(&pending, SIGPIPE) == 1 {
                var noWait = timespec(tv_sec: 0, tv_nsec: 0)
                _ = sigtimedwait(&pipeOnly, nil, &noWait)
            }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        return try body()
    }
}

/// Turns texts into the bytes that stdout and FIFO readers see: each text (sanitized unless raw) and "\n".
/// One text per line: each text (sanitized unless `--raw`) and "\n", laid out straight into the one byte stream
/// a `ChunkPlan` cuts into writes (no array per text, no second copy into the stream).
enum LineFraming {
    /// The framed `texts` as a plan of writes of at most `limit` bytes. Byte for byte what framing each text alone
    /// (`OutputSanitizer.sanitize(text)` + "\n") and concatenating would give.
    static func plan<Texts: Collection<String>>(_ texts: Texts, sanitize: Bool, limit: Int) -> ChunkPlan {
        var total = 0
        for text in texts { total &+= text.utf8.count &+ 1 }  // O(1) per native string; grown below if needed
        var stream: [UInt8] = []
        stream.reserveCapacity(total)
        var ends: [Int] = []
        ends.reserveCapacity(texts.count)
        for text in texts {
            let mark = stream.count
            stream.append(contentsOf: text.utf8)
            // One pass over the bytes just copied (still in cache): printable ASCII, tab and newline need nothing.
            // Anything else asks the sanitizer, which changes the text only when a rule applies.
            if sanitize, !stream.withUnsafeBufferPointer({ Self.isPlain($0[mark...]) }),
               OutputSanitizer.needsWork(text) {
                stream.removeSubrange(mark...)
                stream.append(contentsOf: OutputSanitizer.sanitize(text).utf8)
            }
            stream.append(0x0A)
            ends.append(stream.count)
        }
        return ChunkPlan(stream: stream, ends: ends, limit: limit)
    }

    /// Printable ASCII, tab and newline only. Eight bytes at a time: a word with no byte below 0x20, no 0x7F and
    /// none at or above 0x80 is plain (`hasLess` and `hasZero` are exact about whether such a byte exists); a
    /// word that might not be is checked byte by byte (tab and newline are below 0x20 and still plain). The last
    /// few bytes of a run of at least eight are read as the run's last word (overlapping the one before: a byte
    /// checked twice gives the same answer), not one by one.
    static func isPlain(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var i = bytes.startIndex
        let end = bytes.endIndex
        if let base = bytes.base.baseAddress, end - i >= 8 {
            while end - i >= 8 {
                // Unaligned load from inside the buffer: i + 8 <= endIndex, checked just above.
                if !isPlainWord(base, i) { return false }
                i += 8
            }
            // The tail, as the word that ends at `end` (it starts at or after `startIndex`: the run has 8 bytes).
            return i == end || isPlainWord(base, end - 8)
        }
        while i < end {
            if !isPlainByte(bytes[i]) { return false }
            i += 1
        }
        return true
    }

    /// The eight bytes at `base + i` (all inside the caller's buffer) are printable ASCII, tab or newline.
    @inline(__always)
    static func isPlainWord(_ base: UnsafePointer<UInt8>, _ i: Int) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
        let below20 = (w &- ones &* 0x20) & ~w & highs
        let x7F = w ^ (ones &* 0x7F)
        let is7F = (x7F &- ones) & ~x7F & highs
        if (below20 | is7F | (w & highs)) != 0 {
            for k in i..<(i + 8) where !isPlainByte(base[k]) { return false }
        }
        return true
    }

    @inline(__always) static func isPlainByte(_ b: UInt8) -> Bool { (b >= 0x20 && b < 0x7F) || b == 0x09 || b == 0x0A }
}

/// The ownership rule for what the FIFO sink writes into (the same rule as the store's `PrivatePath`, kept here
/// because the sinks depend on nothing): another local user must not be able to read the dictation, so the FIFO
/// must be ours and closed to group and others, and a directory we create it in must be ours and not writable by
/// others (nobody can swap the FIFO after we made it).
enum Ownership {
    /// Nil if `info` (of a FIFO) is ours with no group/other permission; else the reason and what to run.
    static func fifoProblem(_ info: stat, path: String) -> SinkError? {
        if info.st_uid != geteuid() {
            return SinkError(message: "FIFO \(path) is owned by another user (uid \(info.st_uid)), who could read your dictation",
                             hint: "remove it (`sudo rm \(path)`) and let speakbridge create its own, or use a path "
                                 + "in a private directory such as $XDG_RUNTIME_DIR/speakbridge/dictation.fifo")
        }
        let mode = info.st_mode & 0o7777
        if mode & 0o066 != 0 {
            return SinkError(message: "FIFO \(path) can be opened by other users (mode \(String(mode, radix: 8)))",
                             hint: "remove it (`rm \(path)`) and let speakbridge create its own: a chmod would not close "
                                 + "what another user may already hold open, and a reader holding it gets the dictation")
        }
        return nil
    }

    /// Checks the directory a FIFO is about to be created in (lstat: a symlink must be ours and lead to such a
    /// directory). Nil if fine.
    static func directoryProblem(_ directory: String) -> SinkError? {
        var info = stat()
        guard lstat(directory, &info) == 0 else { return nil }  // mkfifo reports a missing directory itself
        if info.st_mode & S_IFMT == S_IFLNK {
            guard info.st_uid == geteuid(), stat(directory, &info) == 0 else {
                return SinkError(message: "cannot create FIFO in \(directory): it is a symlink owned by another user "
                                     + "(uid \(info.st_uid))",
                                 hint: "choose a path in a private directory such as $XDG_RUNTIME_DIR/speakbridge")
            }
        }
        let mode = info.st_mode & 0o7777
        if info.st_uid != geteuid() || mode & 0o022 != 0 {
            let who = info.st_uid != geteuid() ? "owned by another user (uid \(info.st_uid))"
                                               : "writable by other users (mode \(String(mode, radix: 8)))"
            let shared = mode & S_ISVTX != 0  // a sticky shared directory such as /tmp: chmod is not the answer
            return SinkError(message: "will not create FIFO in \(directory): it is \(who), so someone else could replace the FIFO",
                             hint: "choose a path in a private directory such as $XDG_RUNTIME_DIR/speakbridge/dictation.fifo"
                                 + (shared || info.st_uid != geteuid() ? "" : ", or run `chmod 700 \(directory)`"))
        }
        return nil
    }

    static func directory(of path: String) -> String {
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if dir.isEmpty { return path.hasPrefix("/") ? "/" : "." }
        return dir
    }
}
