import Foundation
import Glibc
import SpeakBridgeSupport
import SpeakBridgeTestSupport
import Testing
@testable import SpeakBridgeSinks

/// A Wayland compositor run by another user receives what is typed and copied: its socket is a name in a
/// directory, which another user can hold when WAYLAND_DISPLAY points into a shared directory or the runtime
/// directory is not private. The sinks check who listens (SO_PEERCRED) and who owns the socket file (lstat), and
/// refuse another user's; wtype then gets the very connection judged (WAYLAND_SOCKET).
@Suite(.serialized)
struct ForeignCompositorTests {
    /// A real sway run as `nobody` (setpriv) with a foot terminal recording its input: the type sink refuses at
    /// its start-up check and at each text, and nothing reaches the terminal.
    @Test(.enabled(if: WaylandCompositor.unavailable(.sway, foreign: true) == nil,
                   "\(WaylandCompositor.unavailable(.sway, foreign: true) ?? "")"))
    func typingIntoAnotherUsersCompositorIsRefused() throws {
        let sway = try WaylandCompositor(.sway, foreign: true)
        defer { sway.stop() }
        let record = try sway.startFoot()
        let refusal = "the Wayland compositor at \(sway.socketName) runs as uid 65534, not this user or root"
        do {
            let sink = try SinkFactory.make(.type(pressEnter: false), sanitize: true, environment: sway.environment)
            defer { sink.close() }
            Issue.record("a type sink started on another user's compositor: \((sink as? DescribedSink)?.method ?? "")")
        } catch {
            #expect(error.message.contains(refusal), "\(error.message)")
            #expect(error.hint?.contains("WAYLAND_DISPLAY") == true)
        }
        // A sink that was never probed (or whose compositor changed hands after the probe) refuses each text.
        let sink = try TypeSink(backend: .wtype, pressEnter: false, environment: sway.environment)
        defer { sink.close() }
        do {
            try sink.deliver(["secret words"]) { _ in }
            Issue.record("typed into another user's compositor")
        } catch {
            #expect(error.message.contains(refusal), "\(error.message)")
        }
        #expect(sway.received(record, expecting: "secret words", patience: .seconds(2)) == "")
    }

    /// wl-copy gets the connection judged (WAYLAND_SOCKET) and copies through it to our compositor; to another
    /// user's nothing is copied. The selection is read back with wl-paste, run as the compositor's user.
    @Test(.enabled(if: WaylandCompositor.unavailable(.sway) == nil && WaylandCompositor.unavailable(.sway, foreign: true) == nil
                   && systemTool("wl-copy") != nil && systemTool("wl-paste") != nil,
                   "needs sway as ours and as nobody, and wl-clipboard"))
    func copyingGoesOnlyToOurCompositor() throws {
        let ours = try WaylandCompositor(.sway)
        defer { ours.stop() }
        let sink = try ClipboardSink(backend: .wlCopy, primary: false, environment: ours.environment)
        try sink.probe()
        try sink.deliver(["first words"]) { _ in }
        #expect(try ours.selection(expecting: "first words") == "first words")

        let theirs = try WaylandCompositor(.sway, foreign: true)
        defer { theirs.stop() }
        let refused = try ClipboardSink(backend: .wlCopy, primary: false, environment: theirs.environment)
        #expect(throws: SinkError.self) { try refused.probe() }
        do {
            try refused.deliver(["secret words"]) { _ in }
            Issue.record("copied to another user's compositor")
        } catch {
            #expect(error.message.contains("runs as uid 65534, not this user or root"), "\(error.message)")
        }
        #expect(try theirs.selection(expecting: "secret words", patience: .seconds(2)) != "secret words")
    }

    /// A listener that never accepts (a wedged compositor, or another user holding the name) makes the check fail
    /// after its patience instead of holding the sink thread in connect(2) for ever: the tool run it replaced had
    /// a timeout.
    @Test func aCompositorThatNeverAcceptsIsGivenUpOn() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/wayland-8"
        let fd = boundUnixSocket(at: path)
        try #require(fd >= 0 && listen(fd, 0) == 0)
        defer { close(fd) }
        var queued: [Int32] = []  // fill the backlog
        defer { queued.forEach { close($0) } }
        while let one = UnixAddress(path)?.connectedStream(patience: .zero) { queued.append(one) }
        try #require(errno == ETIMEDOUT)
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": path])
            Issue.record("connected to a listener that does not accept")
        } catch {
            #expect(error.message.contains("timed out"), "\(error.message)")
        }
        #expect(clock.now - start < .seconds(30))
    }

    /// The socket file is judged too, as ydotool's is: one of another user's is refused even when the process
    /// listening is ours (the kernel asked on the connection says root here), and so is another user's symbolic
    /// link to our socket. No compositor needed: a listening socket of this process stands in for one.
    @Test(.enabled(if: geteuid() == 0, "needs root to give a socket file to another user"))
    func aSocketFileOrLinkOfAnotherUserIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/wayland-9"
        let fd = boundUnixSocket(at: path)
        try #require(fd >= 0 && listen(fd, 16) == 0)  // never accepted: each check's connect waits in the backlog
        defer { close(fd) }
        let environment = ["WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": directory.path]
        try DisplayProbe.checkWayland(environment)  // ours: accepted

        let link = directory.path + "/wayland-link"
        #expect(symlink(path, link) == 0)
        try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": link])  // our link to our socket: accepted
        #expect(lchown(link, 65534, 65534) == 0)
        #expect(throws: SinkError.self) { try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": link]) }
        do {
            try DisplayProbe.checkWayland(["WAYLAND_DISPLAY": link])
        } catch {
            #expect(error.message == "the Wayland socket \(link) is a symbolic link of uid 65534, not this user or root: "
                                   + "that user can point it at a compositor of theirs at any moment")
        }

        #expect(chown(path, 65534, 65534) == 0)
        do {
            try DisplayProbe.checkWayland(environment)
            Issue.record("accepted a Wayland socket of another user")
        } catch {
            #expect(error.message == "the Wayland socket \(path) belongs to uid 65534, not this user or root: "
                                   + "another user made it")
        }
        // The type sink's per-text check is the same: nothing is run.
        let typist = ToolTypist(tool: .wtype, path: "/nonexistent/wtype", environment: environment)
        do {
            _ = try typist.type("hello", skipping: 0, in: nil)
            Issue.record("typed towards another user's socket")
        } catch {
            #expect(error.error.message.contains("belongs to uid 65534"), "\(error.error.message)")
        }
    }
}
