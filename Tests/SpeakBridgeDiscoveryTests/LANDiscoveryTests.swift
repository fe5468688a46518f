// Real avahi on the private test LAN (Tests/netns/lan.sh): this process runs in host `me`,
// peers in other hosts are avahi's own tools or python-zeroconf started through `lan.sh exec`.
import Foundation
import Testing
@testable import SpeakBridgeDiscovery

@Suite("mDNS on the private test LAN", .serialized,
       .enabled(if: TestLAN.current != nil, TestLAN.skipReason))
struct LANDiscoveryTests {
    let lan = TestLAN.current!
    static let txt = [("v", "1"), ("id", "7RQ4-K2M9-XW3D-8HNP")]

    /// A publisher in `me` and the states it reported.
    private func publish(_ name: String, port: Int = 4242,
                         txt: [(String, String)] = Self.txt) -> (MDNSPublisher, Recorder<PublisherState>) {
        let states = Recorder<PublisherState>()
        let publisher = MDNSPublisher(name: name, port: port, txt: txt, retryInterval: .milliseconds(500)) {
            states.append($0)
        }
        return (publisher, states)
    }

    private func established(_ publisher: MDNSPublisher) async -> Bool {
        await eventually { if case .established = publisher.state { true } else { false } }
    }

    /// The states `onStateChange` reported once the last is `last`: they arrive on the publisher's own serial queue,
    /// a moment after `publisher.state` (a snapshot) changed, so reading them at once raced with their delivery.
    private func reported(_ states: Recorder<PublisherState>, endingWith last: PublisherState) async -> [PublisherState] {
        _ = await eventually { states.all.last == last }
        return states.all
    }

    /// `avahi-browse -rtp` in `host`: the resolved line for `name`, split at ';', or nil.
    private func avahiBrowse(on host: String, find name: String) async throws -> [String]? {
        var line: [String]?
        _ = try await eventually(.seconds(10)) {
            let result = try lan.run(on: host, ["avahi-browse", "-rtp", MDNSConstants.serviceType], timeout: .seconds(10))
            line = result.output.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
                .first { $0.count >= 10 && $0[0] == "=" && $0[2] == "IPv4" && Self.unescape($0[3]) == name }
            return line != nil
        }
        return line
    }

    /// avahi-browse -p escapes names like DNS labels: "\032" for a space, "\." for a dot.
    static func unescape(_ label: String) -> String {
        var bytes: [UInt8] = []
        var rest = Substring(label).utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "\\") else { bytes.append(byte); continue }
            let digits = rest.prefix(3)
            if digits.count == 3, digits.allSatisfy({ (48...57).contains($0) }),
               let value = UInt8(String(decoding: digits, as: UTF8.self)) {
                bytes.append(value)
                rest = rest.dropFirst(3)
            } else if let next = rest.popFirst() {
                bytes.append(next)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `avahi-publish-service` in `host`, left running.
    private func peerPublish(on host: String, _ name: String, port: Int, txt: [String]) throws -> ChildProcess {
        try lan.spawn(on: host, ["avahi-publish-service", name, MDNSConstants.serviceType, String(port)] + txt)
    }

    @Test("a published service is seen by avahi-browse on another host, with its TXT")
    func seenByAvahiBrowse() async throws {
        let name = uniqueName("Desk")
        let (publisher, states) = publish(name)
        defer { publisher.stop() }
        #expect(await established(publisher))
        #expect(publisher.publishedName == name)
        #expect(await reported(states, endingWith: .established(name: name)) == [.registering, .established(name: name)])

        let line = try #require(try await avahiBrowse(on: lan.peer, find: name))
        #expect(line[6] == "\(lan.me).local")
        #expect(line[7] == (try lan.address(of: lan.me)))
        #expect(line[8] == "4242")
        // TXT exactly as given, nothing added. avahi-browse prints avahi's string list, which
        // runs in reverse wire order (the zeroconf test checks the wire order itself).
        #expect(line[9] == #""id=7RQ4-K2M9-XW3D-8HNP" "v=1""#)
    }

    @Test("a published service is seen by python-zeroconf on another host",
          .enabled(if: TestLAN.current?.zeroconfPython != nil,
                   Comment(rawValue: TestLAN.current?.zeroconfSkipReason ?? "no test LAN")))
    func seenByZeroconf() async throws {
        let python = try #require(lan.zeroconfPython)
        let finder = URL(fileURLWithPath: lan.script).deletingLastPathComponent().appendingPathComponent("zeroconf_find.py").path
        let name = uniqueName("Desk")
        let (publisher, _) = publish(name, port: 4343)
        defer { publisher.stop() }
        #expect(await established(publisher))

        let peerAddress = try lan.address(of: lan.peer)
        let result = try lan.run(on: lan.peer, [python, finder, name, peerAddress, "10"], timeout: .seconds(30))
        #expect(result.status == 0, "zeroconf_find.py: \(result.output)")
        struct Found: Decodable { var port: Int; var addresses: [String]; var server: String; var txt: [String] }
        let jsonLine = try #require(result.output.split(separator: "\n").last { $0.hasPrefix("{") })
        let found = try JSONDecoder().decode(Found.self, from: Data(jsonLine.utf8))
        #expect(found.port == 4343)
        #expect(found.addresses == [try lan.address(of: lan.me)])
        #expect(found.server == "\(lan.me).local.")
        #expect(found.txt == ["v=1", "id=7RQ4-K2M9-XW3D-8HNP"], "wire order is the caller's order")
    }

    @Test("MDNSBrowser finds a service published on another host, and sees it leave")
    func browserFindsPeer() async throws {
        let name = uniqueName("Peer")
        let peerAddress = try lan.address(of: lan.peer)
        // "ID=shadow" repeats the key: the first one on the wire counts
        let peer = try peerPublish(on: lan.peer, name, port: 4555, txt: ["v=1", "id=PEER-0001", "ID=shadow"])
        defer { peer.stop() }
        let changes = Recorder<[DiscoveredService]>()
        let browser = try MDNSBrowser(onChange: { changes.append($0) })
        defer { browser.stop() }

        #expect(await eventually { browser.services.contains { $0.name == name } })
        let found = try #require(browser.services.first { $0.name == name })
        #expect(found.addresses == [peerAddress])
        #expect(found.hostName == "\(lan.peer).local")
        #expect(found.port == 4555)
        #expect(found.txt == ["v": "1", "id": "PEER-0001"])
        #expect(!found.isLocal)
        #expect(changes.all.last?.contains(found) == true)

        peer.stop()                                  // avahi-publish-service withdraws on SIGTERM
        #expect(await eventually { !browser.services.contains { $0.name == name } })
        #expect(changes.all.last?.contains { $0.name == name } == false)
    }

    @Test("browse(timeout:until:) returns as soon as the wanted service is resolved")
    func browseUntil() async throws {
        let name = uniqueName("Quick")
        let peer = try peerPublish(on: lan.peer, name, port: 4556, txt: ["v=1"])
        defer { peer.stop() }
        let start = ContinuousClock.now
        let services = try MDNSBrowser.browse(timeout: .seconds(15)) { $0.name == name }
        #expect(services.contains { $0.name == name })
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test("two publishers of one name on this host: the second is renamed")
    func localCollision() async throws {
        let name = uniqueName("Twin")
        let (first, _) = publish(name)
        defer { first.stop() }
        #expect(await established(first))
        let (second, states) = publish(name, port: 4243)
        defer { second.stop() }
        #expect(await established(second))
        #expect(first.publishedName == name)
        #expect(second.publishedName == "\(name) #2")
        #expect(await reported(states, endingWith: .established(name: "\(name) #2")).last == .established(name: "\(name) #2"))
    }

    @Test("a name already taken by another host: ours is renamed after probing")
    func remoteCollision() async throws {
        // The established host must answer our probes within ~250 ms. On a loaded 2-core VM its
        // answer can come late; then we win the name and the *peer* renames, which is correct
        // mDNS but not what this test is about. So: up to two attempts with fresh names.
        for attempt in 1...2 {
            let name = uniqueName("Taken")
            let peer = try peerPublish(on: lan.peer, name, port: 4557, txt: ["v=1"])
            defer { peer.stop() }
            _ = try MDNSBrowser.browse(timeout: .seconds(10)) { $0.name == name }   // peer is announced

            let (publisher, states) = publish(name)
            defer { publisher.stop() }
            #expect(await established(publisher))
            if publisher.publishedName == name && attempt == 1 {
                print("note: remote collision attempt 1: the peer lost the name instead of us (late probe answer); retrying")
                continue
            }
            #expect(publisher.publishedName == "\(name) #2")
            #expect(await reported(states, endingWith: .established(name: "\(name) #2")).last == .established(name: "\(name) #2"))
            #expect(try await avahiBrowse(on: lan.peer, find: "\(name) #2") != nil, "the peer sees the new name")
            return
        }
    }

    @Test("avahi-daemon restarts: the publisher publishes again, the browser finds peers again")
    func daemonRestart() async throws {
        let name = uniqueName("Phoenix")
        let peerName = uniqueName("Steady")
        let peer = try peerPublish(on: lan.peer, peerName, port: 4558, txt: ["v=1"])
        defer { peer.stop() }
        let (publisher, states) = publish(name)
        defer { publisher.stop() }
        let lists = Recorder<[DiscoveredService]>()
        let browser = try MDNSBrowser(retryInterval: .milliseconds(500)) { lists.append($0) }
        defer { browser.stop() }
        #expect(await established(publisher))
        #expect(await eventually { browser.services.contains { $0.name == peerName } })

        let restart = try lan.lan(["avahi-restart", lan.me])
        #expect(restart.status == 0, "lan.sh avahi-restart: \(restart.output)")

        #expect(await eventually(.seconds(15)) {
            states.all.contains { if case .noDaemon = $0 { true } else { false } } && publisher.state == .established(name: name)
        }, "states: \(states.all)")
        #expect(states.all.filter { if case .noDaemon = $0 { true } else { false } }.count == 1,
                "one restart, one absence reported: \(states.all)")
        #expect(await eventually(.seconds(15)) { browser.services.contains { $0.name == peerName } })
        #expect(lists.all.contains { $0.isEmpty }, "the list emptied while the daemon was away")
        #expect(try await avahiBrowse(on: lan.peer, find: name) != nil, "the peer sees the service again")
    }

    @Test("avahi-daemon not running: .noDaemon, browser throws, publishing starts when it appears")
    func daemonAbsentThenStarted() async throws {
        let stopped = try lan.lan(["avahi-stop", lan.me])
        #expect(stopped.status == 0)
        defer { _ = try? lan.lan(["avahi-start", lan.me]) }

        let name = uniqueName("Patient")
        let (publisher, states) = publish(name)
        defer { publisher.stop() }
        #expect(await eventually { if case .noDaemon = publisher.state { true } else { false } })
        if case .noDaemon(let why) = publisher.state { #expect(why.contains("not running")) }
        #expect(throws: DiscoveryError.self) { try MDNSBrowser(onChange: { _ in }) }

        let started = try lan.lan(["avahi-start", lan.me])
        #expect(started.status == 0, "lan.sh avahi-start: \(started.output)")
        #expect(await eventually(.seconds(15)) { publisher.state == .established(name: name) }, "states: \(states.all)")
        #expect(states.all.filter { if case .noDaemon = $0 { true } else { false } }.count == 1,
                "absence is reported once: \(states.all)")
    }

    @Test("no D-Bus bus at all: .noDaemon and retries; bus and daemon come up: published")
    func busAbsentThenStarted() async throws {
        let stopped = try lan.lan(["dbus-stop", lan.me])
        #expect(stopped.status == 0, "lan.sh dbus-stop: \(stopped.output)")
        defer {
            _ = try? lan.lan(["dbus-start", lan.me])
            _ = try? lan.lan(["avahi-start", lan.me])
        }

        let name = uniqueName("Early")
        let (publisher, states) = publish(name)             // retries every 0.5 s
        defer { publisher.stop() }
        #expect(await eventually { if case .noDaemon = publisher.state { true } else { false } })
        if case .noDaemon(let why) = publisher.state { #expect(why.contains("D-Bus")) }
        #expect(throws: DiscoveryError.self) { try MDNSBrowser(onChange: { _ in }) }
        try await Task.sleep(for: .seconds(1))              // a few failed retries

        // The bus comes back on the same socket; avahi-client's retry finds it, then the daemon.
        #expect(try lan.lan(["dbus-start", lan.me]).status == 0)
        #expect(try lan.lan(["avahi-start", lan.me]).status == 0)
        #expect(await eventually(.seconds(15)) { publisher.state == .established(name: name) }, "states: \(states.all)")
        #expect(states.all.filter { if case .noDaemon = $0 { true } else { false } }.count == 1,
                "absence is reported once: \(states.all)")
        #expect(try await avahiBrowse(on: lan.peer, find: name) != nil, "the peer sees it")
    }

    @Test("a peer changes its address: the browser reports the new one")
    func peerAddressChange() async throws {
        let name = uniqueName("Mover")
        let oldAddress = try lan.address(of: lan.peer)
        let newAddress = oldAddress.split(separator: ".").prefix(3).joined(separator: ".") + ".42"
        let peer = try peerPublish(on: lan.peer, name, port: 4559, txt: ["v=1"])
        defer { peer.stop() }
        let browser = try MDNSBrowser(onChange: { _ in })
        defer { browser.stop() }
        #expect(await eventually { browser.services.first { $0.name == name }?.addresses == [oldAddress] })

        let moved = try lan.lan(["set-address", lan.peer, newAddress])
        defer { _ = try? lan.lan(["set-address", lan.peer, oldAddress]) }
        #expect(moved.status == 0, "lan.sh set-address: \(moved.output)")
        #expect(await eventually(.seconds(20)) { browser.services.first { $0.name == name }?.addresses == [newAddress] },
                "services: \(browser.services)")
    }

    @Test("two desktops on the LAN are listed separately, each with its own address",
          .enabled(if: TestLAN.current?.peer2 != nil, "needs a third host (lan.sh start trio)"))
    func twoDesktops() async throws {
        let peer2 = try #require(lan.peer2)
        let (nameB, nameC) = (uniqueName("DeskB"), uniqueName("DeskC"))
        let b = try peerPublish(on: lan.peer, nameB, port: 4600, txt: ["v=1", "id=BBBB"])
        defer { b.stop() }
        let c = try peerPublish(on: peer2, nameC, port: 4601, txt: ["v=1", "id=CCCC"])
        defer { c.stop() }
        let browser = try MDNSBrowser(onChange: { _ in })
        defer { browser.stop() }
        let (addressB, addressC) = (try lan.address(of: lan.peer), try lan.address(of: peer2))
        // Eventually, not at once: the test before this one moves `lan.peer` to another address and back, and the
        // caches on the LAN may still hold the moved address for a moment (until its goodbye is processed), which
        // the browser then reports beside the right one until the next resolve replaces it.
        #expect(await eventually(.seconds(20)) {
            let byName = Dictionary(browser.services.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            return byName[nameB]?.addresses == [addressB] && byName[nameC]?.addresses == [addressC]
        }, "services: \(browser.services)")
        let byName = Dictionary(browser.services.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byName[nameB]?.addresses == [addressB])
        #expect(byName[nameC]?.addresses == [addressC])
        #expect(byName[nameB]?.txt["id"] == "BBBB")
        #expect(byName[nameC]?.txt["id"] == "CCCC")
    }
}
