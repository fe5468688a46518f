#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// libsecret, avahi-client and libqrencode are opened with dlopen by what uses them (SharedLibrary), not linked:
/// a one-shot `send` to a desktop that answers at its known address, and a `serve --no-mdns` daemon that received
/// it, load none of them (nor glib, gio, dbus, systemd under them). Real binary, real daemon, loopback; the dynamic
/// loader's own report (LD_DEBUG=files) and the daemon's /proc/PID/maps are the evidence.
@Suite("libraries loaded only when used", .serialized)
struct LazyLibraryTests {
    static let unwanted = ["libavahi", "libsecret", "libglib", "libgio", "libgobject", "libdbus", "libqrencode"]

    @Test("send --text to a known address and serve --no-mdns load no avahi, libsecret, glib or qrencode")
    func oneShotSendLoadsNone() throws {
        let pair = Pair()
        defer { pair.stop() }
        let (_, reader) = try pair.startWithFIFO()
        defer { reader.stop() }
        let send = try Proc(["send", "--text", "lazy"], home: pair.phoneHome, env: ["LD_DEBUG": "files"],
                            label: "send-ld")
        let out = try send.wait(timeout: 30)
        #expect(out.status == 0, "send: \(out.stderr.suffix(2000))")
        try Harness.wait("the line on the FIFO") { reader.snapshot.contains("lazy") }
        #expect(out.stderr.contains("file=libc.so.6"), "LD_DEBUG=files reported the loader's work")
        let loaded = out.stderr.split(separator: "\n").filter { $0.contains("file=") }
        for library in Self.unwanted {
            #expect(!loaded.contains { $0.contains("file=\(library)") }, "send loaded \(library)")
        }
        let pid = try #require(pair.daemon?.process.processIdentifier)
        // Read to the end (a /proc file reports size 0, so a size-based read may stop early).
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/maps"))
        defer { try? handle.close() }
        let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        #expect(maps.contains("libwebsockets"), "the daemon's maps are readable")
        for library in Self.unwanted {
            #expect(!maps.contains(library), "serve --no-mdns mapped \(library)")
        }
    }
}
