#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// The browser front (the HTTPS/WSS listener of `pair --web`) starts only when needed: a desktop without a browser
/// device has no TLS listener (and never initialises OpenSSL); `pair --web` starts it before showing its URL; a
/// daemon restarted with a browser device paired starts it at once; `--no-web` never starts it; a start that fails
/// (port taken) is a clear error of `pair --web` and the daemon runs on. Real binary, loopback; the daemon's own
/// listening sockets (/proc) and curl over TLS are the evidence.
@Suite("Browser front started on demand")
struct LazyWebFrontTests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func web(_ home: String) throws -> [String: Any] {
        try #require(try json(try run(["status", "--json"], home: home).stdout)["web"] as? [String: Any])
    }

    /// A listening socket on a free 127.0.0.1 port below the kernel's ephemeral range: (fd, port). Close the fd to
    /// free the port. Not an ephemeral port (bind to 0): once freed, such a port can be taken at once by any
    /// connect(2) of the suites running in parallel (their local ports come from that range), and the daemon's
    /// listen on it then fails with EADDRINUSE — which made "the next pair --web retries" fail about once in nine
    /// full runs.
    static func holdPort() -> (fd: Int32, port: Int) {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        let below = min(max((range?.first ?? 32768), 10_001), 65_536)
        for _ in 0..<1000 {
            // Close-on-exec: a process another test spawns meanwhile must not keep the port bound after `close`.
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let port = Int.random(in: 10_000..<below)
            address.sin_port = UInt16(port).bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound == 0, listen(fd, 1) == 0 { return (fd, port) }
            close(fd)
        }
        fatalError("no free 127.0.0.1 port below \(below)")
    }

    /// A port that was free a moment ago (for --web-port).
    static func freePort() -> Int {
        let (fd, port) = holdPort()
        close(fd)
        return port
    }

    /// The TCP ports `pid` listens on: its socket inodes (/proc/PID/fd) matched with LISTEN rows of /proc/net/tcp{,6}.
    static func listeningPorts(_ pid: Int32) -> Set<Int> {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        let inodes = Set(fds.compactMap { fd -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                  target.hasPrefix("socket:[") else { return nil }
            return String(target.dropFirst(8).dropLast())
        })
        var ports = Set<Int>()
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                guard fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])),
                      let hex = fields[1].split(separator: ":").last, let port = Int(hex, radix: 16) else { continue }
                ports.insert(port)
            }
        }
        return ports
    }

    /// Whether a TCP connect to 127.0.0.1:port is refused.
    static func refused(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return result != 0 && errno == ECONNREFUSED
    }

    /// The HTTP status of GET https://127.0.0.1:port/ over TLS (certificate not checked), "000" when none.
    static func httpsStatus(_ port: Int) throws -> String {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sk", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "https://127.0.0.1:\(port)/"]
        let pipe = Pipe()
        curl.standardOutput = pipe
        curl.standardError = FileHandle.nullDevice
        try curl.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        curl.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Marks every paired client in the (stopped) desktop's peers.json as a browser device, as a pairing through the
    /// page records it (that pairing itself needs Chromium: Tests/web/e2e.py, which restarts its daemon too).
    static func makeBrowserDevices(_ home: String) throws {
        let path = home + "/state/peers.json"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains(#""role":"client","#))
        let edited = text.replacingOccurrences(of: #""role":"client","#, with: #""role":"client","kind":"browser","#)
        // Rewritten in place: same file, owner and 0600 mode.
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(edited.utf8))
        try handle.close()
    }

    @Test("no browser device: no TLS listener (connect refused), status says not started and why")
    func notStartedWithoutBrowserDevice() throws {
        let webPort = Self.freePort()
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort)])
        let pid = try #require(pair.daemon?.pid)
        #expect(Self.listeningPorts(pid) == [pair.port], "the daemon listens only on its native port")
        #expect(Self.refused(webPort))
        let web = try Self.web(pair.desktopHome)
        #expect(web["enabled"] as? Bool == true)
        #expect(web["listening"] as? Bool == false)
        #expect((web["reason"] as? String)?.contains("no browser device paired") == true)
        #expect(web["url"] == nil)
        let text = try run(["status"], home: pair.desktopHome).stdout
        #expect(text.contains("web page: not started (no browser device paired; `speakbridge pair --web` starts it)"))
        // A native pairing does not start it either.
        try pair.join()
        #expect(Self.listeningPorts(pid) == [pair.port])
    }

    @Test("pair --web starts the front before it answers: the URL's port takes TLS; status shows it listening")
    func pairWebStartsIt() throws {
        let webPort = Self.freePort()
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort)])
        let out = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        #expect(out.status == 0, "\(out.stderr)")
        let url = try #require(try Self.json(out.stdout)["url"] as? String)
        #expect(url.hasPrefix("https://127.0.0.1:\(webPort)/#SB1:"))
        let pid = try #require(pair.daemon?.pid)
        #expect(Self.listeningPorts(pid) == [pair.port, webPort])
        #expect(try Self.httpsStatus(webPort) == "200")
        let web = try Self.web(pair.desktopHome)
        #expect(web["listening"] as? Bool == true)
        #expect(web["url"] as? String == "https://127.0.0.1:\(webPort)/")
        // A second pair --web reuses it.
        #expect(try run(["pair", "--web", "--json"], home: pair.desktopHome).status == 0)
        #expect(Self.listeningPorts(pid) == [pair.port, webPort])
    }

    @Test("a daemon restarted with a browser device paired listens for TLS at once; with --no-web never")
    func restartWithBrowserDevice() throws {
        let webPort = Self.freePort()
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort)])
        try pair.join()
        pair.daemon?.terminate()
        try Self.makeBrowserDevices(pair.desktopHome)

        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort)])
        // The first status answer already shows it: the front starts before the control socket opens.
        let web = try Self.web(pair.desktopHome)
        #expect(web["listening"] as? Bool == true)
        #expect(web["url"] as? String == "https://127.0.0.1:\(webPort)/")
        let pid = try #require(pair.daemon?.pid)
        #expect(Self.listeningPorts(pid) == [pair.port, webPort])
        #expect(try Self.httpsStatus(webPort) == "200")
        let devices = try run(["devices", "--json"], home: pair.desktopHome).stdout
        #expect(devices.contains(#""kind":"browser""#), "\(devices)")

        pair.daemon?.terminate()
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort), "--no-web"])
        let off = try Self.web(pair.desktopHome)
        #expect(off["enabled"] as? Bool == false)
        #expect(off["reason"] as? String == "disabled (--no-web)")
        #expect(Self.listeningPorts(try #require(pair.daemon?.pid)) == [pair.port])
        #expect(Self.refused(webPort))
    }

    @Test("--no-web: pair --web says the daemon runs with --no-web and starts nothing")
    func noWebRefusesPairWeb() throws {
        let webPort = Self.freePort()
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(webPort), "--no-web"])
        let out = try run(["pair", "--web"], home: pair.desktopHome)
        #expect(out.status != 0)
        #expect(out.stdout.isEmpty, "no URL, no QR")
        #expect(out.stderr.contains("speakbridge: error: this desktop does not offer the browser route: disabled (--no-web)"))
        #expect(out.stderr.contains("speakbridge: hint: the daemon runs with --no-web: restart it without that flag"))
        #expect(Self.listeningPorts(try #require(pair.daemon?.pid)) == [pair.port])
        #expect(Self.refused(webPort))
    }

    @Test("the web port taken when pair --web asks: a clear error, no URL; the daemon runs on; the next pair --web retries")
    func portTakenAtPairWeb() throws {
        let held = Self.holdPort()
        var holding = true
        defer { if holding { close(held.fd) } }
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", String(held.port)])
        let out = try run(["pair", "--web"], home: pair.desktopHome)
        #expect(out.status != 0)
        #expect(out.stdout.isEmpty, "no URL, no QR")
        #expect(out.stderr.contains("speakbridge: error: the browser front (the HTTPS page) cannot start: "
                                    + "cannot listen on 127.0.0.1:\(held.port): Address already in use"), "\(out.stderr)")
        #expect(out.stderr.contains("speakbridge: hint: choose a free port with `speakbridge serve --web-port PORT`"))
        let daemon = try #require(pair.daemon)
        #expect(daemon.process.isRunning)
        let web = try Self.web(pair.desktopHome)
        #expect(web["listening"] as? Bool == false)
        #expect((web["reason"] as? String)?.hasPrefix("the last start failed: cannot listen on") == true)
        // The native route is untouched.
        try pair.join()
        #expect(try pair.send(["after the failed start"]).status == 0)
        // Port freed: the next pair --web starts the front.
        close(held.fd)
        holding = false
        // Retried while the port is still taken: once, in a full parallel run, it still was a moment after the close
        // (another suite's process had it: the daemon's own retry is what this checks, not the port's owner).
        var again = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        for _ in 0..<20 where again.status != 0 && again.stderr.contains("Address already in use") {
            usleep(500_000)
            again = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        }
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Self.httpsStatus(held.port) == "200")
        #expect(try Self.web(pair.desktopHome)["listening"] as? Bool == true)
    }

    @Test("a certificate file others may read when pair --web asks: a clear error naming it; fixed, pair --web works")
    func certificateProblemAtPairWeb() throws {
        let pair = Pair()
        defer { pair.stop() }
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", "0"])
        let meta = pair.desktopHome + "/config/web-cert.meta"
        #expect(FileManager.default.createFile(atPath: meta, contents: Data("junk\n".utf8),
                                               attributes: [.posixPermissions: 0o644]))
        let out = try run(["pair", "--web"], home: pair.desktopHome)
        #expect(out.status != 0)
        #expect(out.stdout.isEmpty, "no URL, no QR")
        #expect(out.stderr.contains("speakbridge: error: the browser front (the HTTPS page) cannot start: \(meta) is readable by other users"),
                "\(out.stderr)")
        #expect(pair.daemon?.process.isRunning == true)
        #expect(Self.listeningPorts(try #require(pair.daemon?.pid)) == [pair.port])
        chmod(meta, 0o600)
        let again = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Self.web(pair.desktopHome)["listening"] as? Bool == true)
    }
}
