#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeClientCore
import SpeakBridgeSupport

/// Reads a descriptor into lines, keeping the unterminated last line between reads.
///
/// `@unchecked Sendable`: used by one thread at a time — the WebSocket socket thread when stdin is watched there
/// (its calls are serialized by the service loop), or the `sb-stdin` thread otherwise, never both.
final class LineReader: @unchecked Sendable {
    struct Step {
        var lines: InputBatch
        /// The input ended (end of file, or a read error); `lines` then ends with the unterminated rest.
        var ended: Bool
    }

    let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    private var splitter = LineSplitter()
    private(set) var ended = false

    init(fd: Int32) { self.fd = fd }

    /// One read(2): the complete lines it finished, and whether the input ended. EINTR and EAGAIN give no lines
    /// (and no end) unless `eagainEnds` (a hung-up pipe has nothing more to wait for).
    func readOnce(eagainEnds: Bool = false) -> Step {
        guard !ended else { return Step(lines: InputBatch(), ended: true) }
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && (errno == EINTR || (errno == EAGAIN && !eagainEnds)) { return Step(lines: InputBatch(), ended: false) }
        if n <= 0 {
            ended = true
            return Step(lines: splitter.finishBatch(), ended: true)
        }
        Trace.mark("read")
        return Step(lines: splitter.batch(in: buffer[0..<n]), ended: false)
    }
}
