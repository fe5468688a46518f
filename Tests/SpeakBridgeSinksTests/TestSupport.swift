import Foundation
import Glibc
import SpeakBridgeSupport

/// A fresh directory under /tmp, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/speakbridge-sinks-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Runs `body` on its own thread (not the cooperative pool, since it blocks in syscalls) and hands back its result.
final class BackgroundThread<Value: Sendable>: Sendable {
    private let result = Locked<Value?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> Value) {
        let thread = Thread { [self] in
            let value = body()
            self.result.withLock { $0 = value }
            self.finished.signal()
        }
        thread.start()
    }

    /// The thread's result, or nil if it did not finish within `timeout`.
    func join(timeout: Duration) -> Value? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        guard finished.wait(timeout: .now() + seconds) == .success else { return nil }
        return result.withLock { $0 }
    }
}

/// Reads from `fd` until `enough(received)` holds, end of file, or `deadline`; returns what it read.
func readUntil(fd: Int32, deadline: Duration = .seconds(30), chunk: Int = 4096, pause: Duration = .zero,
               _ enough: ([UInt8]) -> Bool) -> [UInt8] {
    let clock = ContinuousClock()
    let end = clock.now.advanced(by: deadline)
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: chunk)
    while !enough(received), clock.now < end {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, 100)
        if ready <= 0 { continue }
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, chunk) }
        if count == 0 { break }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { continue }
            break
        }
        received.append(contentsOf: buffer[0..<count])
        if pause > .zero { sleepFor(pause) }
    }
    return received
}

func sleepFor(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    _ = nanosleep(&request, nil)
}

func count(of byte: UInt8, in bytes: [UInt8]) -> Int {
    bytes.reduce(0) { $0 + ($1 == byte ? 1 : 0) }
}

/// Texts of varied shape: short, Unicode, and every 97th one longer than PIPE_BUF.
func sampleTexts(_ total: Int) -> [String] {
    (0..<total).map { i in
        if i % 97 == 50 {
            return "long \(i) " + String(repeating: "Grüße 日本 ", count: 700)  // ~9.8 KB
        }
        return "text \(i): the quick brown fox, é 漢字 🙂"
    }
}

/// The bytes stdout/FIFO readers must see for `texts` (no sanitizing needed for `sampleTexts`).
func framed(_ texts: [String]) -> [UInt8] {
    Array(texts.map { $0 + "\n" }.joined().utf8)
}

/// Path of an executable in /usr/bin or /bin, nil when absent.
func systemTool(_ name: String) -> String? {
    for directory in ["/usr/local/bin", "/usr/bin", "/bin"] where access("\(directory)/\(name)", X_OK) == 0 {
        return "\(directory)/\(name)"
    }
    return nil
}

/// nil when equal, else a short description of the first difference (byte arrays print too long to read).
func difference(_ received: [UInt8]?, _ expected: [UInt8]) -> String? {
    guard let received else { return "nothing received" }
    if received == expected { return nil }
    let common = min(received.count, expected.count)
    let index = (0..<common).first { received[$0] != expected[$0] } ?? common
    func around(_ bytes: [UInt8]) -> String {
        String(decoding: bytes[max(0, index - 40)..<min(bytes.count, index + 40)], as: UTF8.self).debugDescription
    }
    return "received \(received.count) bytes, expected \(expected.count); first difference at \(index): "
        + "got \(around(received)) expected \(around(expected))"
}
