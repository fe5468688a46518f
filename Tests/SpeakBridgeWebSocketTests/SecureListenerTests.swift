import Foundation
import SpeakBridgeWebSocket
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The TLS listener of the browser route: a second port on the same server, HTTPS static files from a read-only
/// mount with the configured headers, and the negotiated subprotocol and listener per connection. Driven with the
/// real OpenSSL and curl command-line tools as the other side.
@Suite("Secure listener", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")
                                       && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"),
                                   "curl or openssl is not installed"))
struct SecureListenerTests {
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A directory with a self-signed P-256 certificate, its key and a page.
    static func fixture() throws -> String {
        let dir = "/tmp/sb-tls-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir + "/www", withIntermediateDirectories: true)
        try "<!doctype html><title>page</title>".write(toFile: dir + "/www/index.html", atomically: true, encoding: .utf8)
        try "export const x = 1;".write(toFile: dir + "/www/app.js", atomically: true, encoding: .utf8)
        let made = try run(["/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-days", "1", "-subj", "/CN=test", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"])
        #expect(made.status == 0)
        return dir
    }

    func configuration(_ dir: String) -> WebSocketServerConfiguration {
        var config = WebSocketServerConfiguration()
        config.extraSubprotocols = ["speakbridge.v1.aesgcm"]
        config.secure = SecureListenerConfiguration(
            port: 0, certificatePath: dir + "/cert.pem", privateKeyPath: dir + "/key.pem", documentRoot: dir + "/www",
            headers: [(name: "content-security-policy:", value: "default-src 'self'")])
        return config
    }

    @Test func servesFilesOverTLSWithHeadersAndNothingElse() throws {
        let dir = try Self.fixture()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let echo = try EchoServer(configuration: configuration(dir))
        defer { echo.shutdown() }  // EchoServer.shutdown also breaks its server's reference cycle (LeakSanitizer)
        let port = try #require(echo.server.securePort)
        #expect(port != echo.server.port)
        let page = try Self.run(["/usr/bin/curl", "-sk", "-D", "-", "https://127.0.0.1:\(port)/"])
        #expect(page.output.contains("HTTP/1.1 200"))
        #expect(page.output.lowercased().contains("content-security-policy: default-src 'self'"))
        #expect(page.output.contains("<title>page</title>"))
        let script = try Self.run(["/usr/bin/curl", "-sk", "-D", "-", "https://127.0.0.1:\(port)/app.js"])
        #expect(script.output.lowercased().contains("content-type: application/javascript")
                || script.output.lowercased().contains("content-type: text/javascript"))
        let missing = try Self.run(["/usr/bin/curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
                                    "https://127.0.0.1:\(port)/nothing.js"])
        #expect(missing.output == "404")
        // Nothing outside the mount, whatever the path says.
        let escape = try Self.run(["/usr/bin/curl", "-sk", "--path-as-is", "-o", "/dev/null", "-w", "%{http_code}",
                                   "https://127.0.0.1:\(port)/../cert.pem"])
        #expect(escape.output != "200")
        let key = try Self.run(["/usr/bin/curl", "-sk", "--path-as-is", "-w", "%{http_code}",
                                "https://127.0.0.1:\(port)/%2e%2e/key.pem"])
        #expect(!key.output.contains("PRIVATE KEY"))
        // The plain port still serves no files, and the TLS port speaks no plain HTTP.
        let plain = try Self.run(["/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(echo.server.port)/"])
        #expect(plain.output != "200")
        let cleartext = try Self.run(["/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/"])
        #expect(cleartext.output != "200")
    }

    @Test func theChosenSubprotocolAndListenerAreReported() async throws {
        let dir = try Self.fixture()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let echo = try EchoServer(configuration: configuration(dir))
        defer { echo.shutdown() }  // EchoServer.shutdown also breaks its server's reference cycle (LeakSanitizer)
        let log = EventLog()
        let client = try WebSocketClient(onEvent: log.handler)
        defer { client.shutdown() }
        let aes = client.connect(host: "127.0.0.1", port: echo.server.port, path: "/speakbridge.v1/session",
                                 subprotocol: "speakbridge.v1.aesgcm")
        #expect(await log.waitOpened(aes))
        let chacha = client.connect(host: "127.0.0.1", port: echo.server.port, path: "/speakbridge.v1/session")
        #expect(await log.waitOpened(chacha))
        #expect(await echo.log.wait { echo.log.openedIDs($0).count == 2 })
        let infos = echo.log.openedIDs().compactMap { echo.server.info(of: $0) }
        #expect(Set(infos.map(\.subprotocol)) == ["speakbridge.v1", "speakbridge.v1.aesgcm"])
        #expect(infos.allSatisfy { !$0.isSecure })
        let other = client.connect(host: "127.0.0.1", port: echo.server.port, path: "/speakbridge.v1/session",
                                   subprotocol: "speakbridge.v1.other")
        #expect(await log.waitClosed(other) != nil)
        #expect(!log.openedIDs().contains(other))
    }
}
