import Testing
@testable import SpeakBridgeDiscovery

@Suite("Merging resolves")
struct ServiceTableTests {
    private func key(_ name: String, interface: Int32 = 2, ip: Int = 4) -> ResolveKey {
        ResolveKey(interface: interface, ipVersion: ip, name: name, type: "_speakbridge._tcp", domain: "local")
    }

    private func resolution(_ address: String?, host: String = "desk.local", port: Int = 4242,
                            txt: [String: String] = ["v": "1"], local: Bool = false) -> Resolution {
        Resolution(hostName: host, address: address, port: port, txt: txt, isLocal: local)
    }

    @Test("one service seen on two interfaces and both protocols becomes one entry")
    func mergesReports() {
        var table = ServiceTable()
        table.update(key("Desk", interface: 3, ip: 4), resolution("192.168.1.20"))
        table.update(key("Desk", interface: 2, ip: 4), resolution("169.254.9.2"))
        table.update(key("Desk", interface: 2, ip: 6), resolution("fe80::1%lan0"))
        table.update(key("Desk", interface: 3, ip: 6), resolution("2001:db8::5", local: true))
        let services = table.services
        #expect(services.count == 1)
        #expect(services[0].addresses == ["169.254.9.2", "192.168.1.20", "2001:db8::5", "fe80::1%lan0"])
        #expect(services[0].isLocal)
        #expect(services[0].port == 4242)
    }

    @Test("distinct names stay distinct and come sorted")
    func distinctServices() {
        var table = ServiceTable()
        table.update(key("Laptop"), resolution("169.254.9.3", host: "laptop.local"))
        table.update(key("Desk"), resolution("169.254.9.2"))
        #expect(table.services.map(\.name) == ["Desk", "Laptop"])
    }

    @Test("the same address on two reports is listed once; a report without address adds none")
    func duplicateAddresses() {
        var table = ServiceTable()
        table.update(key("Desk", interface: 2), resolution("169.254.9.2"))
        table.update(key("Desk", interface: 5), resolution("169.254.9.2"))
        table.update(key("Desk", interface: 6, ip: 6), resolution(nil))
        #expect(table.services.first?.addresses == ["169.254.9.2"])
    }

    @Test("a new resolve replaces the old address; a removal drops only that report")
    func updatesAndRemovals() {
        var table = ServiceTable()
        // (mutating calls are made outside #expect, which cannot expand them)
        let added = table.update(key("Desk"), resolution("169.254.9.2"))
        let repeated = table.update(key("Desk"), resolution("169.254.9.2"))
        let moved = table.update(key("Desk"), resolution("169.254.9.12"))
        #expect(added && !repeated && moved)
        #expect(table.services.first?.addresses == ["169.254.9.12"])
        table.update(key("Desk", ip: 6), resolution("fe80::2%lan0"))
        let removedV4 = table.remove(key("Desk"))
        #expect(removedV4)
        #expect(table.services.first?.addresses == ["fe80::2%lan0"])
        let removedV6 = table.remove(key("Desk", ip: 6))
        let removedAgain = table.remove(key("Desk"))
        #expect(removedV6 && !removedAgain)
        #expect(table.services.isEmpty)
    }

    @Test("host, port and TXT come from the lowest interface/protocol report")
    func deterministicFields() {
        var table = ServiceTable()
        table.update(key("Desk", interface: 7), resolution("10.0.0.2", port: 2, txt: ["v": "2"]))
        table.update(key("Desk", interface: 3), resolution("10.0.0.1", port: 1, txt: ["v": "1"]))
        let service = table.services[0]
        #expect(service.port == 1)
        #expect(service.txt == ["v": "1"])
    }

    @Test("IPv6 link-local addresses carry their interface as zone, or are skipped")
    func linkLocalScope() {
        #expect(ResolvedAddress.format("fe80::1", isIPv6LinkLocal: true, interfaceName: "lan0") == "fe80::1%lan0")
        #expect(ResolvedAddress.format("fe80::1", isIPv6LinkLocal: true, interfaceName: nil) == nil)
        #expect(ResolvedAddress.format("169.254.1.1", isIPv6LinkLocal: false, interfaceName: "lan0") == "169.254.1.1")
    }

    @Test("address order: IPv4 numerically, then IPv6, then link-local IPv6")
    func addressOrder() {
        let sorted = ResolvedAddress.sorted(["fe80::1%eth0", "2001:db8::1", "10.0.0.10", "10.0.0.9", "192.168.0.1"])
        #expect(sorted == ["10.0.0.9", "10.0.0.10", "192.168.0.1", "2001:db8::1", "fe80::1%eth0"])
    }
}
