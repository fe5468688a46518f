import Glibc
@testable import SpeakBridgeControl
import SpeakBridgeProtocol
import SpeakBridgeSupport
import SpeakBridgeTestSupport
import Testing

/// The control socket serves only a process of the daemon's user or root (SO_PEERCRED), even when its directory
/// and the socket itself let another user in. The other user is `nobody`, through setpriv, with Python's socket
/// module as the client (a real connect(2) from a process of that uid).
@Suite("Control seam: who may connect", .serialized)
struct ControlPeerTests {
    static let python = "/usr/bin/python3"
    static let canImpersonate = geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && access(python, X_OK) == 0

    /// Connects to the socket at argv[1], sends one status request and prints `reply:` and whatever came back
    /// before the server closed (nothing, when it refused).
    static let client = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(sys.argv[1])
        data = b""
        try:
            s.sendall(b'{"cmd":"status"}\\n')
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as error:
            print("error:", error)
        print("reply:", data.decode("utf-8", "replace").strip())
        """

    /// What the client prints, run as `uid` (nil: as this process's user).
    static func ask(_ path: String, as uid: uid_t?) throws -> String {
        let argv = (uid.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups", "--"] } ?? [])
            + [python, "-c", client, path]
        let child = try SpawnedChild(argv)
        defer { child.stop() }
        #expect(child.wait(timeout: .seconds(20)) == 0, "\(child.output)")
        return child.output
    }

    @Test("another user's process is closed unanswered even when the modes let it in; ours and root's are served",
          .enabled(if: canImpersonate, "needs root, setpriv and /usr/bin/python3 to connect as another user"))
    func anotherUsersConnectionIsRefused() throws {
        var template = Array("/tmp/sb-control-XXXXXX".utf8CString)
        let made: UnsafeMutablePointer<CChar>? = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = String(cString: try #require(made))
        defer { rmdir(directory) }
        let path = directory + "/control.sock"
        let served = Locked(0)
        let server = try ControlServer(path: path) { _ in
            served.withLock { $0 += 1 }
            return .object([("ok", .bool(true))])
        }
        defer { server.stop() }
        // What the daemon made private, loosened: nobody may enter the directory and open the socket.
        chmod(directory, 0o711)
        chmod(path, 0o666)

        let theirs = try Self.ask(path, as: 65534)
        #expect(theirs.contains("reply: \n") && !theirs.contains(#""ok""#), "\(theirs)")  // closed, nothing said
        #expect(served.withLock { $0 } == 0)

        let ours = try Self.ask(path, as: nil)
        #expect(ours.contains(#"reply: {"ok":true}"#), "\(ours)")
        #expect(served.withLock { $0 } == 1)
    }

    @Test("refusals are logged at most once in 10 s; the next line counts those not logged")
    func refusalsAreThrottled() {
        var refusals = ControlRefusals()
        let second: UInt64 = 1_000_000_000
        #expect(refusals.admit(now: 5 * second) == 0)
        #expect(refusals.admit(now: 6 * second) == nil)
        #expect(refusals.admit(now: 14 * second) == nil)
        #expect(refusals.admit(now: 15 * second) == 2)
        #expect(refusals.admit(now: 26 * second) == 0)
        let line = ControlRefusals.line(path: "/run/x/control.sock", credentials: (pid: 1, uid: 65534), error: 0,
                                        unlogged: 2)
        #expect(line.hasPrefix("control socket /run/x/control.sock: refused a connection from uid 65534 (pid 1"))
        #expect(line.hasSuffix("check who can enter /run/x (and 2 more refused since the last such line)"))
    }
}
