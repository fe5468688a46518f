import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

@Suite("Trust is never transferable")
struct TrustFilterTests {
    let desk = device(1)
    let phone = device(2)
    static let trustKeys = ["devices.list", "device.name", "peers.0", "pairing.code", "pairings.phone", "identity.key",
                            "trust.level", "policy.default", "psk.value", "speakbridge.policy", "speakbridge.localOnly",
                            "Devices.List", "IDENTITY.key", "devices"]

    @Test("a batch with any trust key is refused whole, whatever the policy", arguments: trustKeys)
    func refusedWhole(key: String) throws {
        let s = try TestStore("trust", device: phone)
        defer { s.remove() }
        try s.policy(.accept)
        let before = s.fileBytes
        #expect(throws: ConfigError.self) {
            _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: desk), update(key, "x", ms: s.clock.ms, by: desk)], from: desk)
        }
        #expect(errorCode { _ = try s.apply([update(key, "x", ms: s.clock.ms, by: desk)], from: desk, acceptOverride: true) } == .forbidden)
        #expect(s.fileBytes == before)
        #expect(try s.value("ui.theme") == nil)
    }

    @Test("trust keys cannot be set, unset or marked locally", arguments: trustKeys)
    func refusedLocally(key: String) throws {
        let s = try TestStore("trust-local", device: phone)
        defer { s.remove() }
        #expect(throws: ConfigError.self) { try s.set(key, .string("x")) }
        #expect(throws: ConfigError.self) { try s.store.update { tx throws(ConfigError) in try tx.setLocalOnly(key, true) } }
    }

    @Test("a trust key that somehow got into the file is never offered")
    func neverOffered() throws {
        let s = try TestStore("trust-offer", device: desk)
        defer { s.remove() }
        try s.set("ui.theme", .string("dark"))
        try s.store.update { tx throws(ConfigError) in
            tx.document.records["devices.list"] = ConfigRecord(key: "devices.list", version: tx.document.records["ui.theme"]!.version,
                                                               body: .value(.string("x")))
        }
        #expect(try s.offer().map(\.key) == ["ui.theme"])
        #expect(try s.offer(["devices.list"]).isEmpty)
    }

    @Test("the policy is not a key: no batch can change it")
    func policyUntouchable() throws {
        let s = try TestStore("trust-policy", device: phone)
        defer { s.remove() }
        try s.policy(.ask)
        _ = try? s.apply([update("policy.default", "accept", ms: s.clock.ms, by: desk),
                          update("speakbridge.policy", "accept", ms: s.clock.ms, by: desk)], from: desk, acceptOverride: true)
        #expect(try s.store.read().document.policy.defaultPolicy == .ask)
    }
}
