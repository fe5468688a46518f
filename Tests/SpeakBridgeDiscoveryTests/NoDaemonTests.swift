// No D-Bus system bus at all: nothing to talk to, so these run anywhere (no mDNS can be sent).
//
// libdbus reads DBUS_SYSTEM_BUS_ADDRESS once per process and caches it, so the test cannot just
// set it: the parent test starts this test binary again with the address pointing at a socket
// that does not exist, and runs only the child suite there.
import Foundation
import Testing
@testable import SpeakBridgeDiscovery

private let childMarker = "SPEAKBRIDGE_NO_DBUS_CHILD"

@Suite("No D-Bus")
struct NoDaemonTests {
    @Test("publisher and browser without a D-Bus system bus (in a child process)")
    func withoutBus() throws {
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=/nonexistent/speakbridge-test/no-bus"
        environment[childMarker] = "1"
        environment["SPEAKBRIDGE_NETNS"] = nil
        let result = try ChildProcess.run(binary, ["--testing-library", "swift-testing", "--filter", "NoDaemonChild"],
                                          environment: environment, timeout: .seconds(60))
        #expect(result.status == 0, "child run:\n\(result.output)")
        #expect(result.output.contains(#"Suite "No D-Bus (child process side)" passed"#),
                "the child suite ran and passed:\n\(result.output)")
    }
}

@Suite("No D-Bus (child process side)",
       .enabled(if: ProcessInfo.processInfo.environment[childMarker] != nil,
                "runs only inside the process started by \"publisher and browser without a D-Bus system bus\""))
struct NoDaemonChild {
    @Test("the publisher reports .noDaemon once, keeps retrying, stops cleanly")
    func publisher() async throws {
        let states = Recorder<PublisherState>()
        let publisher = MDNSPublisher(name: "Nobody", port: 4242, txt: [("v", "1")], retryInterval: .milliseconds(100)) {
            states.append($0)
        }
        #expect(await eventually(.seconds(5)) { if case .noDaemon = publisher.state { true } else { false } })
        try await Task.sleep(for: .milliseconds(600))         // several retries
        guard case .noDaemon(let why) = publisher.state else {
            Issue.record("state \(publisher.state)")
            return
        }
        #expect(why.contains("D-Bus"))
        #expect(states.all == [.noDaemon(why)], "reported once, not per retry")
        #expect(publisher.publishedName == nil)
        publisher.stop()
        publisher.stop()
    }

    @Test("the browser throws DiscoveryError.noDaemon")
    func browser() {
        #expect {
            _ = try MDNSBrowser(onChange: { _ in })
        } throws: { error in
            guard let error = error as? DiscoveryError, case .noDaemon = error else { return false }
            return !error.hint.isEmpty
        }
        #expect(throws: DiscoveryError.self) { try MDNSBrowser.browse(timeout: .milliseconds(200)) }
    }

    @Test("invalid input fails without touching avahi")
    func invalidInput() {
        let badTXT = MDNSPublisher(name: "Desk", port: 4242, txt: [("a=b", "1")]) { _ in }
        defer { badTXT.stop() }
        guard case .failed = badTXT.state else { Issue.record("state \(badTXT.state)"); return }
        let badPort = MDNSPublisher(name: "Desk", port: 70000, txt: [String: String]()) { _ in }
        defer { badPort.stop() }
        guard case .failed = badPort.state else { Issue.record("state \(badPort.state)"); return }
    }
}
