#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension Pair {
    /// Starts the daemon with one `jsonl:` FIFO sink and `--raw`, which carries each chunk's exact text
    /// JSON-escaped (sanitizing would turn controls into U+FFFD), and a reader on that FIFO. `stop` ends the reader,
    /// also one still blocked in open(2) because the daemon never wrote (it can only return once a writer opens the
    /// FIFO).
    func startRawJSONLReader() throws -> (reader: FifoReader, stop: () -> Void) {
        let fifo = desktopHome + "/dictation.jsonl"
        try startDaemon(sinks: ["jsonl:" + fifo], extra: ["--raw"])
        let reader = FifoReader(path: fifo)
        reader.start()
        return (reader, {
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            reader.stop()
        })
    }
}
