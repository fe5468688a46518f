import Foundation
import Glibc
import Testing
@testable import SpeakBridgeSinks

/// An X server run by another user receives what is typed and copied: the abstract X socket `@/tmp/.X11-unix/X0`
/// has no permissions (anyone may bind it while no server serves `:0`). The type and clipboard sinks check who
/// runs the server (SO_PEERCRED) and refuse another user's. A real server: Xvfb run as `nobody` through setpriv.
@Suite(.serialized, .enabled(if: geteuid() == 0 && systemTool("setpriv") != nil,
                             "needs root and setpriv to run a server as another user"))
struct ForeignDisplayTests {
    static let nobody: uid_t = 65534

    /// The X socket directory made by root first: an Xvfb run as nobody on a fresh machine would otherwise make it,
    /// owned by nobody, for every later server.
    init() {
        if access("/tmp/.X11-unix", F_OK) != 0 {
            _ = mkdir("/tmp/.X11-unix", 0o1777)
            _ = chmod("/tmp/.X11-unix", 0o1777)
        }
    }

    @Test(.enabled(if: XvfbServer.executable != nil, "Xvfb is not installed (make test installs it)"))
    func typingOnAnotherUsersXServerIsRefused() throws {
        let server = try XvfbServer(runAs: Self.nobody)
        defer { server.stop() }
        do {
            let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: server.environment)
            defer { sink.close() }
            try (sink as? DescribedSink)?.probe()
            try sink.deliver(["secret words"]) { _ in }
            Issue.record("typed into an X server of another user")
        } catch {
            #expect(error.message.contains("the X server at \(server.display) runs as uid 65534, not this user or root"),
                    "\(error.message)")
        }
    }

    @Test(.enabled(if: XvfbServer.executable != nil && systemTool("xclip") != nil, "Xvfb or xclip is not installed"))
    func copyingToAnotherUsersXServerIsRefused() throws {
        let server = try XvfbServer(runAs: Self.nobody)
        defer { server.stop() }
        do {
            try DisplayProbe.checkX11(server.display)
            Issue.record("accepted an X server of another user")
        } catch {
            #expect(error.message.contains("runs as uid 65534"), "\(error.message)")
        }
        // The same check passes a server of our own (the other X11 suites run against such servers).
        let ours = try XvfbServer()
        defer { ours.stop() }
        try DisplayProbe.checkX11(ours.display)
    }

    /// The clipboard's probe accepted our server at start; the server then goes and another user's takes its
    /// display. The next copy is refused instead of handing the text to that user. Before, only the probe asked.
    @Test(.enabled(if: XvfbServer.executable != nil && systemTool("xclip") != nil, "Xvfb or xclip is not installed"))
    func aDisplayAnotherUserTakesOverAfterTheProbeIsRefused() throws {
        let ours = try XvfbServer(stoppedWhileUsed: true)
        let number = try #require(DisplayProbe.localDisplayNumber(ours.display))
        let sink = try ClipboardSink(backend: .xclip, primary: false, environment: ours.environment)
        try sink.probe()
        try sink.deliver(["first words"]) { _ in }
        #expect(ours.selection(primary: false, expecting: "first words") == "first words")
        ours.stop()
        let theirs = try XvfbServer(runAs: Self.nobody, number: number)
        defer { theirs.stop() }
        do {
            try sink.deliver(["secret words"]) { _ in }
            Issue.record("copied to an X server of another user")
        } catch {
            #expect(error.message.contains("the X server at \(ours.display) runs as uid 65534"), "\(error.message)")
        }
    }

    @Test func localDisplayNumbers() {
        #expect(DisplayProbe.localDisplayNumber(":0") == 0)
        #expect(DisplayProbe.localDisplayNumber(":12.1") == 12)
        #expect(DisplayProbe.localDisplayNumber("unix:3") == 3)
        #expect(DisplayProbe.localDisplayNumber("host:0") == nil)
        #expect(DisplayProbe.localDisplayNumber(":") == nil)
        #expect(DisplayProbe.localDisplayNumber(":x") == nil)
        #expect(DisplayProbe.localDisplayNumber("") == nil)
    }
}
