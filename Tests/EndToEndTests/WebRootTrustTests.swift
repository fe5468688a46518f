#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// The page's files are served only when no other user could have changed them (WebRoot): `serve --web-root DIR`
/// with DIR writable by others, a symlinked or foreign-owned `app.js`, a FIFO, a shared parent — the front does not
/// start, `pair --web` says why, and `status` shows `web.listening: false` with the path. A copy of Web/ with
/// ordinary modes is served. Real binary, loopback.
@Suite("Browser front: the page's files are checked before they are served")
struct WebRootTrustTests {
    /// The source tree's Web/.
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Web").path

    /// A copy of Web/ at `base/web` (directory 0755, files 0644), made in a private directory; returns its path.
    static func copyOfThePage(in base: String) throws -> String {
        let root = base + "/web"
        #expect(mkdir(root, 0o755) == 0)
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: root + "/" + name)
            #expect(chmod(root + "/" + name, 0o644) == 0)
        }
        return root
    }

    /// Starts a daemon serving `root`, asks `pair --web`; returns (pair --web's outcome, status's `web`).
    static func attempt(_ root: String, pair: Pair) throws -> (Outcome, [String: Any]) {
        try pair.startDaemon(sinks: ["stdout"], extra: ["--web-port", "0", "--web-root", root])
        let out = try run(["pair", "--web", "--json"], home: pair.desktopHome)
        return (out, try LazyWebFrontTests.web(pair.desktopHome))
    }

    /// The front did not start because of `path`: pair --web failed naming it, status says not listening and why.
    static func expectRefused(_ out: Outcome, _ web: [String: Any], naming path: String,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(out.status != 0, "pair --web served an untrusted page", sourceLocation: sourceLocation)
        #expect(out.stdout.isEmpty, "a URL was shown", sourceLocation: sourceLocation)
        #expect(out.stderr.contains("the page's files cannot be trusted") && out.stderr.contains(path),
                "\(out.stderr)", sourceLocation: sourceLocation)
        #expect(web["listening"] as? Bool == false, sourceLocation: sourceLocation)
        let reason = web["reason"] as? String ?? ""
        #expect(reason.contains(path), "\(reason)", sourceLocation: sourceLocation)
    }

    @Test("a copy of Web/ with ordinary modes is served")
    func ordinaryCopyIsServed() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        let (out, web) = try Self.attempt(root, pair: pair)
        #expect(out.status == 0, "\(out.stderr)")
        #expect(web["listening"] as? Bool == true)
    }

    @Test("DIR mode 0777: not served, the reason names DIR")
    func worldWritableRoot() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        #expect(chmod(root, 0o777) == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: root)
    }

    @Test("DIR mode 1777 (sticky, as /tmp): still not served, others could add pages")
    func stickyRoot() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        #expect(chmod(root, 0o1777) == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: root)
    }

    @Test("a directory above DIR writable by others: not served")
    func sharedParent() throws {
        let pair = Pair()
        defer { pair.stop() }
        let parent = pair.desktopHome + "/shared"
        #expect(mkdir(parent, 0o755) == 0)
        let root = try Self.copyOfThePage(in: parent)
        #expect(chmod(parent, 0o777) == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: parent)
    }

    @Test("app.js a symlink (even to a good copy): not served, the reason names it")
    func symlinkedScript() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        #expect(rename(root + "/app.js", pair.desktopHome + "/app.js") == 0)
        #expect(symlink(pair.desktopHome + "/app.js", root + "/app.js") == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: root + "/app.js")
    }

    @Test("a FIFO in DIR: not served (lws would block on it)")
    func fifoInRoot() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        #expect(mkfifo(root + "/stall.js", 0o644) == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: root + "/stall.js")
    }

    @Test("app.js writable by others, or owned by another user: not served")
    func scriptOthersCanChange() throws {
        let pair = Pair()
        defer { pair.stop() }
        let root = try Self.copyOfThePage(in: pair.desktopHome)
        #expect(chmod(root + "/app.js", 0o666) == 0)
        let (out, web) = try Self.attempt(root, pair: pair)
        Self.expectRefused(out, web, naming: root + "/app.js")
        pair.daemon?.terminate()

        #expect(chmod(root + "/app.js", 0o644) == 0)
        if geteuid() == 0 {
            #expect(chown(root + "/app.js", 65_534, 65_534) == 0)
            let (foreign, foreignWeb) = try Self.attempt(root, pair: pair)
            Self.expectRefused(foreign, foreignWeb, naming: root + "/app.js")
        }
    }
}
