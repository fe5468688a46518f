// Watching a file descriptor for readability inside the service loop, so that input (a pipe,
// FIFO, socket or terminal on stdin) is read on the service thread itself and what it sends goes
// out in the same loop iteration, without a cross-thread wake-up.
//
// How: a dup() of the descriptor is adopted into the context as an lws "raw file"
// (lws_adopt_descriptor_vhost_via_info, LWS_ADOPT_RAW_FILE_DESC). lws polls it with the
// sockets and calls LWS_CALLBACK_RAW_RX_FILE on POLLIN. On POLLHUP without POLLIN (a pipe
// whose writers closed) lws closes the wsi instead, so LWS_CALLBACK_RAW_CLOSE_FILE calls the
// handler once more, with `hungUp`, to read what is left. lws closes the descriptor it adopted
// when the wsi goes; that is the dup, never the caller's descriptor.
//
// A watch is tied to its wsi through lws's opaque user data (the watch ID, from the same
// counter as connection IDs, so it never names a connection).
import Dispatch
import SpeakBridgeSupport
internal import CLibWebSockets
#if canImport(Glibc)
import Glibc
#endif

/// Identifies one descriptor watched with ``WebSocketClient/watchReadable(fd:onReadable:)``.
public struct WebSocketWatchID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "watch#\(rawValue)" }
}

/// The application's readability handler, stored as a value (C-LIBRARY-NOTES §6.2).
/// Called with `hungUp` false on POLLIN (one read; returns false to end the watch) and with
/// `hungUp` true once when lws closes the descriptor (read to the end; the result is ignored).
struct ReadableHandler: Sendable {
    let call: @Sendable (_ hungUp: Bool) -> Bool
}

/// A request to adopt a descriptor, with the answer the caller waits for.
final class WatchRequest: Sendable {
    let id: WebSocketWatchID
    let fd: Int32
    let handler: ReadableHandler
    let result = Locked<Bool?>(nil)  // a pthread mutex, like every lock here (README: sanitizers)
    let done = DispatchSemaphore(value: 0)

    init(id: WebSocketWatchID, fd: Int32, handler: ReadableHandler) {
        self.id = id
        self.fd = fd
        self.handler = handler
    }

    func answer(_ ok: Bool) {
        result.withLock { $0 = ok }
        done.signal()
    }
}

/// One watched descriptor. Service thread only.
final class Watch {
    let id: WebSocketWatchID
    let handler: ReadableHandler
    var wsi: OpaquePointer?

    init(id: WebSocketWatchID, handler: ReadableHandler) {
        self.id = id
        self.handler = handler
    }
}

extension ServiceLoop {
    /// Whether `fd` is something poll() reports readiness for meaningfully. Regular files,
    /// directories and block devices always poll readable, so watching them would spin.
    static func isWatchable(_ fd: Int32) -> Bool {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return false }
        switch info.st_mode & S_IFMT {
        case S_IFIFO, S_IFSOCK, S_IFCHR: return true
        default: return false
        }
    }

    /// Watches `fd` for readability on the service thread (any thread; waits for the answer).
    func watchReadable(fd: Int32, handler: ReadableHandler) -> WebSocketWatchID? {
        guard ServiceLoop.isWatchable(fd) else { return nil }
        let request = WatchRequest(id: WebSocketWatchID(rawValue: makeConnectionID().rawValue), fd: fd, handler: handler)
        if isServiceThread && callbackDepth > 0 {
            // Already inside an lws callback, like the commands drained from the inbox.
            return adopt(request) ? request.id : nil
        }
        guard enqueue(.watch(request)) else { return nil }
        request.done.wait()
        return request.result.withLock { $0 } == true ? request.id : nil
    }

    /// Adopts a dup of the request's descriptor (service thread). False if lws refused it.
    func adopt(_ request: WatchRequest) -> Bool {
        guard let context, !stopRequested, let protocols,
              let vhost = lws_get_vhost_by_name(context, "default") else { return false }
        let copy = fcntl(request.fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { return false }
        // lws makes what it adopts non-blocking, and a dup shares the open file description with the caller's
        // descriptor — for stdin, with the shell's terminal or the writer's pipe end: its flags are put back.
        let flags = fcntl(copy, F_GETFL)
        defer { if flags >= 0 { _ = fcntl(copy, F_SETFL, flags) } }
        let watch = Watch(id: request.id, handler: request.handler)
        // Registered first: lws calls back (RAW_ADOPT_FILE) during the adoption.
        watches[request.id] = watch
        var info = lws_adopt_desc_t()
        info.vh = vhost
        info.type = LWS_ADOPT_RAW_FILE_DESC
        info.fd = lws_sock_file_fd_type(filefd: copy)
        info.vh_prot_name = protocols[0].name
        info.opaque = UnsafeMutableRawPointer(bitPattern: UInt(request.id.rawValue))
        guard let wsi = lws_adopt_descriptor_vhost_via_info(&info) else {
            // Whether lws closed the copy on failure is not documented; leaking one descriptor
            // is the safe side of that.
            removeWatch(request.id)
            return false
        }
        watch.wsi = wsi
        return true
    }

    /// The watch of `wsi`: the last one found without a hash (stdin's, every paced line of `send`).
    private func watch(for wsi: OpaquePointer) -> Watch? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        let id = WebSocketWatchID(rawValue: UInt64(UInt(bitPattern: raw)))
        if let last = lastWatch, last.id == id { return last }
        let found = watches[id]
        if found != nil { lastWatch = found }
        return found
    }

    /// `watches[id] = nil`, forgetting it as the last one found too.
    private func removeWatch(_ id: WebSocketWatchID) {
        watches[id] = nil
        if lastWatch?.id == id { lastWatch = nil }
    }

    /// LWS_CALLBACK_RAW_RX_FILE. Returning -1 makes lws close the wsi (and the adopted copy).
    func watchedReadable(_ wsi: OpaquePointer) -> Int32 {
        guard let watch = watch(for: wsi) else { return -1 }
        if watch.handler.call(false) {
            return 0
        }
        lws_set_opaque_user_data(wsi, nil)
        removeWatch(watch.id)
        return -1
    }

    /// LWS_CALLBACK_RAW_CLOSE_FILE: hang-up or an error on a watch that is still wanted. The
    /// handler gets one last call, which reads what is left up to the end (or the error).
    func watchedClosed(_ wsi: OpaquePointer) {
        guard let watch = watch(for: wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        removeWatch(watch.id)
        _ = watch.handler.call(true)
    }

    /// Before the context is destroyed: no handler runs from lws's final close callbacks; a
    /// request still waiting in the inbox hears no.
    func forgetWatches(dropped: [Command]) {
        for watch in watches.values {
            if let wsi = watch.wsi {
                lws_set_opaque_user_data(wsi, nil)
            }
        }
        watches.removeAll()
        lastWatch = nil
        for case let .watch(request) in dropped { request.answer(false) }
    }
}
