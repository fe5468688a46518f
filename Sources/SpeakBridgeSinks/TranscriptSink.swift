internal import Glibc
public import SpeakBridgeProtocol
internal import SpeakBridgeSupport
import SpeakBridgeStore

/// `transcript:DIR`: one set of files per (device, session) — Markdown to read, a JSONL companion that is the
/// transcript's truth, WebVTT when chunks carry times (`TranscriptFormat` has the layout).
///
/// Class (c), `DeliveryClass.ownPosition`: the JSONL line of a chunk is appended and fsynced before the write
/// counts, so the file holds the sink's position. At start the sink scans DIR (`TranscriptDirectory.scan`), cuts
/// off a torn last line (a crash mid-write: never counted), and answers `position` from the last complete line;
/// it also skips, itself, any chunk at or below that position. A crash therefore neither loses nor repeats a
/// chunk in the JSONL. The WebVTT and then the Markdown are written after it; whenever they may lag (a crash
/// between the writes, a failed write) the paragraphs and cues they miss are appended from the JSONL's tail
/// (`TranscriptRepair`, cost proportional to what is missing), or, when their tails cannot be understood (torn,
/// edited), they are rebuilt from the whole JSONL. A session resumed after a reconnect or a restart continues the
/// same files.
///
/// Flow of `deliver`: for each run of one session's items: find or create its files (new: O_EXCL, 0600, named by
/// start time and device name) → append the new lines to NAME.jsonl, fsync (a failure cuts the file back and
/// nothing counts) → append cues to NAME.vtt, then paragraphs to NAME.md.
public final class TranscriptSink: Sink {
    public let directory: String
    public let label: String
    private let sanitize: Bool

    private struct Session: Sendable {
        var name: String
        var lastSeq: UInt64
        /// The Markdown/WebVTT may lag the JSONL: repair them before appending.
        var stale: Bool
    }
    private struct State: Sendable {
        var sessions: [Key: Session] = [:]
        var closed = false
        var problem: String?
    }
    private struct Key: Hashable, Sendable {
        var device: DeviceID
        var session: String
    }
    private let state = Locked(State())

    /// Creates DIR (0700) if missing, checks it, and reads every transcript's position.
    public init(directory: String, sanitize: Bool = true) throws(SinkError) {
        try TranscriptDirectory.prepare(directory)
        let absolute = Self.absolute(directory)
        self.directory = absolute
        label = "transcript:\(directory)"
        self.sanitize = sanitize
        var sessions: [Key: Session] = [:]
        for entry in try TranscriptDirectory.scan(absolute, repair: true) {
            let key = Key(device: entry.device, session: entry.session)
            // Newest first: when a session has two file sets (never made by this sink), the newest continues.
            guard sessions[key] == nil else { continue }
            sessions[key] = Session(name: entry.name, lastSeq: entry.lastSeq, stale: Self.lags(absolute, entry.name))
        }
        state.withLock { $0.sessions = sessions }
        for (key, session) in sessions where session.stale {
            // A crash may have come between a JSONL line and its paragraph: make the Markdown whole again now.
            if (try? repair(session.name)) != nil { state.withLock { $0.sessions[key]?.stale = false } }
        }
    }

    public var deliveryClass: DeliveryClass { .ownPosition }

    public var health: String? { state.withLock { $0.closed ? "\(label) sink is closed" : $0.problem } }

    public func waitUntilReady(timeout: Duration) -> String? {
        state.withLock { $0.closed ? "\(label) sink is closed" : nil }
    }

    public func position(device: DeviceID, session: String) -> UInt64? {
        state.withLock { $0.sessions[Key(device: device, session: session)]?.lastSeq }
    }

    public func close() { state.withLock { $0.closed = true } }

    public func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void,
                        didWrite: (Int) -> Void) throws(SinkError) {
        if state.withLock({ $0.closed }) { throw SinkError(message: "\(label) sink is closed") }
        var done = 0
        var readableFailure: SinkError?
        do throws(SinkError) {
            while done < items.count {
                let first = items[done]
                let key = Key(device: first.device, session: first.session)
                var end = done + 1
                while end < items.count, items[end].device == first.device, items[end].session == first.session {
                    end += 1
                }
                if let failure = try write(items[done..<end], key: key, willWrite: { try willWrite(end) }) {
                    readableFailure = failure
                }
                done = end
                didWrite(done)
            }
        } catch {
            state.withLock { $0.problem = error.message }
            throw SinkError(delivered: done, message: error.message, hint: error.hint)
        }
        state.withLock { $0.problem = readableFailure?.message }
        // Every item is in its JSONL (what counts); a Markdown/WebVTT that could not be written is rebuilt later,
        // but the problem is reported, not swallowed.
        if let readableFailure {
            throw SinkError(delivered: items.count, message: readableFailure.message, hint: readableFailure.hint)
        }
    }

    /// One session's run: appends what the JSONL does not hold yet, then the readable files. Throws when the JSONL
    /// write failed (nothing of the run counts); returns the failure of the Markdown/WebVTT write, if any.
    private func write(_ run: ArraySlice<SinkItem>, key: Key,
                       willWrite: () throws -> Void) throws(SinkError) -> SinkError? {
        var session = try open(key, first: run.first!)
        let fresh = run.filter { $0.chunk.seq > session.lastSeq }  // what the file holds is never written again
        guard let last = fresh.last else { return nil }
        do { try willWrite() } catch { throw SinkError(message: "could not record progress: \(error)") }
        let jsonlPath = "\(directory)/\(session.name).jsonl"
        let jsonl = try TranscriptDirectory.append(jsonlPath)
        defer { Glibc.close(jsonl) }
        try TranscriptDirectory.write(jsonl, fresh.flatMap { JSONLine.encode($0, sanitize: sanitize) },
                                      path: jsonlPath, sync: true)
        session.lastSeq = last.chunk.seq
        session.stale = true  // until the Markdown and WebVTT have these lines too
        let stored = session
        state.withLock { $0.sessions[key] = stored }
        do throws(SinkError) {
            try appendReadable(fresh, name: session.name)
        } catch {
            return error
        }
        session.stale = false
        let readable = session
        state.withLock { $0.sessions[key] = readable }
        return nil
    }

    /// The session's files: known ones (repaired first when their Markdown may lag), else new ones.
    private func open(_ key: Key, first: SinkItem) throws(SinkError) -> Session {
        if var known = state.withLock({ $0.sessions[key] }), access("\(directory)/\(known.name).jsonl", F_OK) == 0 {
            if known.stale {
                try repair(known.name)
                known.stale = false
                let rebuilt = known
                state.withLock { $0.sessions[key] = rebuilt }
            }
            return known
        }
        // New, or its files were removed while the desktop ran: new files, continuing after what was written.
        let written = state.withLock { $0.sessions[key]?.lastSeq } ?? 0
        let base = TranscriptFormat.stamp(Int(time(nil))) + "_"
            + TranscriptFormat.fileNamePart(first.deviceName, device: first.device)
        for attempt in 1...100 {
            let name = attempt == 1 ? base : "\(base)-\(attempt)"
            let fd = TranscriptDirectory.create("\(directory)/\(name).jsonl")
            if fd < 0 && errno == EEXIST { continue }
            guard fd >= 0 else {
                throw SinkError(message: "cannot create a transcript in \(directory): \(POSIX.describe(errno))")
            }
            Glibc.close(fd)
            try rebuild(name, first: first)  // the Markdown with its title
            let session = Session(name: name, lastSeq: written, stale: false)
            state.withLock { $0.sessions[key] = session }
            return session
        }
        throw SinkError(message: "cannot create a transcript in \(directory): 100 files named \(base) exist")
    }

    /// Appends cues to NAME.vtt (creating it with the first timed chunk), then paragraphs to NAME.md. In this
    /// order: a Markdown's last marker then tells what both hold (`TranscriptRepair`).
    private func appendReadable(_ items: [SinkItem], name: String) throws(SinkError) {
        let cues = items.compactMap(TranscriptFormat.vttCue).joined()
        if !cues.isEmpty {
            let vttPath = "\(directory)/\(name).vtt"
            var vtt = TranscriptDirectory.create(vttPath)
            var text = TranscriptFormat.vttHeader + cues
            if vtt < 0 {
                guard errno == EEXIST else {
                    throw SinkError(message: "cannot create \(vttPath): \(POSIX.describe(errno))")
                }
                vtt = try TranscriptDirectory.append(vttPath)
                text = cues
            }
            defer { Glibc.close(vtt) }
            try TranscriptDirectory.write(vtt, Array(text.utf8), path: vttPath, sync: true)
        }
        let mdPath = "\(directory)/\(name).md"
        let md = try TranscriptDirectory.append(mdPath)
        defer { Glibc.close(md) }
        let paragraphs = items.map { TranscriptFormat.markdownParagraph($0, sanitize: sanitize) }.joined()
        try TranscriptDirectory.write(md, Array(paragraphs.utf8), path: mdPath, sync: true)
    }

    /// Makes NAME.md and NAME.vtt whole again: by appending what they miss when their tails can be read, else by
    /// a full rebuild.
    private func repair(_ name: String) throws(SinkError) {
        if (try? TranscriptRepair.appendMissing(directory: directory, name: name, sanitize: sanitize)) == true {
            return
        }
        try rebuild(name)
    }

    /// Writes NAME.md (and NAME.vtt when any chunk is timed) anew from NAME.jsonl, atomically (temp + rename).
    /// `first`: the item a new, still empty transcript starts with (for its title).
    private func rebuild(_ name: String, first: SinkItem? = nil) throws(SinkError) {
        let jsonlPath = "\(directory)/\(name).jsonl"
        let bytes: [UInt8]
        do throws(StoreError) { bytes = try FileIO.read(jsonlPath) ?? [] } catch {
            throw SinkError(message: error.message, hint: error.hint)
        }
        let items = bytes.split(separator: 0x0A).compactMap(JSONLine.decode)
        guard let head = items.first ?? first else { return }
        var markdown = TranscriptFormat.markdownHeader(head, name: name)
        for item in items { markdown += TranscriptFormat.markdownParagraph(item, sanitize: sanitize) }
        let cues = items.compactMap(TranscriptFormat.vttCue).joined()
        do throws(StoreError) {
            try FileIO.atomicWrite("\(directory)/\(name).md", Array(markdown.utf8))
            if !cues.isEmpty {
                try FileIO.atomicWrite("\(directory)/\(name).vtt", Array((TranscriptFormat.vttHeader + cues).utf8))
            }
        } catch {
            throw SinkError(message: error.message, hint: error.hint)
        }
    }

    /// The Markdown is missing or not newer than the JSONL: a crash may have come between the two writes. (File
    /// times tick coarsely, so equal times count as lagging: the cost of a false alarm is reading three tails.)
    private static func lags(_ directory: String, _ name: String) -> Bool {
        var md = stat()
        var jsonl = stat()
        guard lstat("\(directory)/\(name).md", &md) == 0, lstat("\(directory)/\(name).jsonl", &jsonl) == 0 else {
            return true
        }
        let (a, b) = (md.st_mtim, jsonl.st_mtim)
        return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec <= b.tv_nsec)
    }

    private static func absolute(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
