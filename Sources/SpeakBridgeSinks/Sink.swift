public import SpeakBridgeProtocol

/// A place where received transcript text goes: stdout, a FIFO, a framed FIFO, transcript files, the clipboard,
/// keystrokes.
///
/// Threading: each sink is driven by one dedicated thread of the daemon (`SinkRunner` in SpeakBridgeDelivery), which
/// calls `waitUntilReady` and `deliver` in a loop. Both may block that thread (`waitUntilReady` at most `timeout`;
/// `deliver` of the stdout sink as long as the reader does not read; the tool-based sinks at most the tool timeout).
/// `health`, `position` and `close` may be called from any thread.
///
/// Progress contract: `deliver` calls `willWrite(k)` immediately before the one write syscall or tool invocation
/// that completes `items[k-1]`, and `didWrite(k)` right after it succeeded (k is cumulative within the call and may
/// jump by more than one when a single write carries several items). If a write fails, the thrown
/// `SinkError.delivered` is the truth: it counts items that were fully handed over, and may be smaller than the
/// last `k` passed to `willWrite`. Which of the two calls the pipeline records progress on is the sink's
/// `DeliveryClass`, and that class is what a crash of the desktop can do to the sink's output (see there).
public protocol Sink: AnyObject, Sendable {
    /// "stdout", "fifo:/path", "jsonl:/path", "transcript:/dir", "clipboard", "clipboard:primary", "type", …
    var label: String { get }
    /// nil when the sink could accept a write now; otherwise why not (for `status`).
    var health: String? { get }
    /// When the pipeline records this sink's progress, and so what a crash can do to its output.
    var deliveryClass: DeliveryClass { get }
    /// Blocks the calling (dedicated sink) thread at most `timeout` until a write can proceed without blocking;
    /// returns nil when ready, else the reason ("no reader on FIFO /run/x: open it with `cat /run/x`").
    func waitUntilReady(timeout: Duration) -> String?
    /// Delivers `items` in order; see the type's documentation for the `willWrite`/`didWrite` contract.
    func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void, didWrite: (Int) -> Void) throws(SinkError)
    /// `.ownPosition` sinks only: the last seq of (device, session) this sink holds durably, nil if it holds none.
    /// The pipeline asks before it hands the sink any chunk of a session it has no level for.
    func position(device: DeviceID, session: String) -> UInt64?
    /// Releases the sink's resources. Later calls to `deliver` fail; `close` itself is idempotent.
    func close()
}

/// What a crash of the desktop (SIGKILL, power cut) can do to a sink's output. The one place this rule is written;
/// README and PROTOCOL.md repeat it per sink.
///
/// The desktop acks a chunk only after every sink took it and the progress log (or the sink itself) made that
/// durable, so the phone resends everything not acked; the question is only what the sink had already shown.
public enum DeliveryClass: Sendable, Equatable {
    /// (a) Progress is recorded right *before* the write that completes a text (stdout, `fifo:`, clipboard,
    /// typing: unframed output, where a reader could not recognise a repeat). A crash between that record and the
    /// write loses exactly that write and nothing else:
    /// - stdout, `fifo:`: one write(2) of at most 4096 bytes — the whole texts it would have completed (several
    ///   short lines) and, for a text longer than 4096 bytes, its last piece. Such a long text is written in
    ///   pieces and recorded only before its last one, so a crash between two earlier pieces is the one way these
    ///   sinks repeat anything: the text is written whole again after the restart, and the reader sees its
    ///   first part twice, without a line feed between.
    /// - clipboard: one tool run, i.e. the batch it would have put in the selection (which holds only the latest
    ///   text anyway).
    /// - typing: one tool run, i.e. one text (or the rest of it, if the kill came while it was being typed).
    case recordBeforeWrite
    /// (b) Progress is recorded right *after* the write (`jsonl:`: each line carries device, session and seq). A
    /// crash between the write and the record repeats exactly that write (at most 4096 bytes of whole lines) after
    /// the restart; a reader drops lines whose seq it has already seen for that (device, session). Nothing is lost.
    /// A line longer than 4096 bytes cut by a crash between two of its pieces is written whole again: the reader
    /// sees one line that starts with the torn piece and recovers the object from its last `{"device":`.
    case recordAfterWrite
    /// (c) The sink keeps its own position durably (`transcript:`: the seq is in the file, fsynced before the write
    /// counts) and the pipeline asks it (`Sink.position`) instead of the progress log. Neither lost nor repeated.
    case ownPosition
}

/// One chunk as a sink receives it: who sent it, in which session, and the chunk with its optional fields.
///
/// Immutable, and stored once per message: the chunks of one message (one device, one session) share one object
/// that holds the device, its name, the session and the message's chunk array as the desktop decoded it, and an
/// item is that object and its place in the array. Copying an item (the pipeline hands one to every sink's queue,
/// a queue hands it on in a batch) retains one reference; a message of a burst (hundreds of chunks) makes one
/// object, not one per chunk, and copies no chunk (one allocation and one chunk copy per line were about a tenth
/// of the desktop's instructions per burst line).
public struct SinkItem: Sendable, Equatable {
    // `Sendable`: every stored property is an immutable `let` of a Sendable type.
    @usableFromInline final class Batch: Sendable {
        @usableFromInline let device: DeviceID
        @usableFromInline let deviceName: String?
        @usableFromInline let session: String
        @usableFromInline let chunks: [Chunk]
        @usableFromInline let generation: UInt64

        init(device: DeviceID, deviceName: String?, session: String, chunks: [Chunk], generation: UInt64) {
            self.device = device
            self.deviceName = deviceName
            self.session = session
            self.chunks = chunks
            self.generation = generation
        }
    }

    @usableFromInline let batch: Batch
    /// This item's chunk in `batch.chunks` (always a valid index: set only by the initializers below).
    @usableFromInline let offset: Int

    @inlinable public var device: DeviceID { batch.device }
    /// The paired device's name, when the desktop knows it (a peer-chosen string: sanitize before showing it).
    @inlinable public var deviceName: String? { batch.deviceName }
    @inlinable public var session: String { batch.session }
    @inlinable public var chunk: Chunk { batch.chunks[offset] }
    /// `chunk.text` and `chunk.seq`, read in place (no copy of the whole chunk, as `chunk` makes).
    @inlinable public var text: String { batch.chunks[offset].text }
    /// `chunk.textUTF8Count` and `chunk.withTextUTF8`, in place: the text's bytes without a `String` made for them
    /// (a decoded chunk keeps its text in the frame).
    @inlinable public var textUTF8Count: Int { batch.chunks[offset].textUTF8Count }
    @inlinable public func withTextUTF8<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try batch.chunks[offset].withTextUTF8(body)
    }
    @inlinable public var seq: UInt64 { batch.chunks[offset].seq }
    /// The pipeline's count of revocations when the desktop accepted this chunk's message (0 outside the
    /// pipeline): an item whose device was revoked since is dropped, not written (`DeliveryPipeline.forget`).
    @inlinable public var generation: UInt64 { batch.generation }

    public init(device: DeviceID, deviceName: String? = nil, session: String, chunk: Chunk) {
        batch = Batch(device: device, deviceName: deviceName, session: session, chunks: [chunk], generation: 0)
        offset = 0
    }

    init(batch: Batch, offset: Int) {
        self.batch = batch
        self.offset = offset
    }

    /// One item per chunk of one message, in order, all sharing one object (the chunk array is kept as it is).
    public static func items(device: DeviceID, deviceName: String? = nil, session: String,
                             chunks: [Chunk], generation: UInt64 = 0) -> [SinkItem] {
        let batch = Batch(device: device, deviceName: deviceName, session: session, chunks: chunks,
                          generation: generation)
        return (0..<chunks.count).map { SinkItem(batch: batch, offset: $0) }
    }

    /// Same device and session as `other` (true at once for two items of one message).
    @inlinable public func isSameSession(as other: SinkItem) -> Bool {
        batch === other.batch || (batch.session == other.batch.session && batch.device == other.batch.device)
    }

    public static func == (a: SinkItem, b: SinkItem) -> Bool {
        (a.batch === b.batch && a.offset == b.offset)
            || (a.device == b.device && a.deviceName == b.deviceName && a.session == b.session && a.chunk == b.chunk)
    }
}

/// A sink that shows only the text (stdout, `fifo:`, clipboard, typing): class (a), with the text-only `deliver`
/// whose `willComplete` is `willWrite` above. Conforming types get `Sink`'s item `deliver` for free.
public protocol TextSink: Sink {
    /// Delivers `texts` in order; `willComplete(k)` comes right before the write that completes `texts[k-1]`.
    func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError)
}

extension TextSink {
    public var deliveryClass: DeliveryClass { .recordBeforeWrite }

    public func deliver(_ items: [SinkItem], willWrite: (Int) throws -> Void,
                        didWrite: (Int) -> Void) throws(SinkError) {
        try deliver(items.map(\.chunk.text), willComplete: willWrite)
        didWrite(items.count)
    }
}

extension Sink {
    public func position(device: DeviceID, session: String) -> UInt64? { nil }

    /// Text-only convenience for callers without a session (tests, one-off tools): `texts` become chunks 1… of an
    /// anonymous session of an all-zero device; `willComplete` is `willWrite`. (Every `TextSink` has its own.)
    /// A used-up turn (`SinkError.Scope.turnUsedUp`) is no failure here: the rest is handed again at once, and
    /// `willComplete(k)` comes once per k.
    public func deliver(_ texts: [String], willComplete: (Int) throws -> Void) throws(SinkError) {
        let nobody = DeviceID(publicKeyDigest: Array(repeating: 0, count: 32))
        let items = texts.enumerated().map { index, text in
            SinkItem(device: nobody, session: "", chunk: Chunk(seq: UInt64(index) + 1, text: text))
        }
        var done = 0
        var announced = 0
        while true {
            do throws(SinkError) {
                try deliver(Array(items[done...]), willWrite: { k in
                    guard done + k > announced else { return }
                    announced = done + k
                    try willComplete(done + k)
                }, didWrite: { _ in })
                return
            } catch where error.scope == .turnUsedUp {
                done += error.delivered
            } catch {
                var failure = error
                failure.delivered += done
                throw failure
            }
        }
    }
}

/// A sink failure. `delivered` counts the items of the failed `deliver` call that were fully written before the
/// failure; the daemon resumes from there.
public struct SinkError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Items fully written before the failure (0 for errors outside `deliver`).
    public var delivered: Int
    /// What went wrong, lowercase, without trailing period; never contains transcript text.
    public var message: String
    /// What the user can do about it, if anything.
    public var hint: String?
    /// The sink took what it had room for and waits for more (a full FIFO): flow control, not a failure. The
    /// runner does not warn about it; a wait that lasts a whole second is a problem it reports (`waitUntilReady`).
    public var waitsForRoom: Bool
    /// Whom the failure holds: the whole sink (every device waits), or only the session of the text it stopped at.
    public var scope: Scope

    /// Whom a `SinkError` holds, and so what the daemon serves meanwhile.
    public enum Scope: Sendable, Equatable {
        /// The sink cannot write now (a tool that fails, no display, a held modifier key): every device waits.
        case sink
        /// Only the session of the text the sink stopped at is held, for a reason of its own (its target window
        /// lost the focus, a character the method cannot type): the sink holds no half-written output of it that
        /// another text could be written into, so the daemon serves other devices meanwhile and retries this
        /// session after them. Its own texts keep their order.
        case session
        /// Not a failure: the sink used up its turn (`TypeSink.turn`) partway through a long text and keeps how far
        /// it got; the daemon serves other devices, then hands the same text again and the sink goes on from there.
        case turnUsedUp
    }

    public init(delivered: Int = 0, message: String, hint: String? = nil, waitsForRoom: Bool = false,
                scope: Scope = .sink) {
        self.delivered = delivered
        self.message = message
        self.hint = hint
        self.waitsForRoom = waitsForRoom
        self.scope = scope
    }

    public var description: String { message }
}
