import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Found by review (a stolen phone key): changes a device offered under policy `ask` outlived its revoke, secret
/// included, and a plain `config accept` applied them.
@Suite("A revoked device leaves nothing pending")
struct RevokedDeviceTests {
    let desk = device(1)
    let phone = device(2)
    let tablet = device(3)
    static let planted = "sk-or-planted-by-a-stolen-phone"

    func secretOffer(_ key: String, ms: UInt64, by d: DeviceID) -> ConfigUpdate {
        ConfigUpdate(key: key, version: HLCTimestamp(ms: ms, counter: 0, device: d), body: .secret(Self.planted))
    }

    func secretsFile(_ s: TestStore) -> String {
        String(decoding: ((try? FileIO.read(s.home.config + "/secrets.json")) ?? nil) ?? [], as: UTF8.self)
    }

    @Test("forget(device:) drops its pending changes and their secrets; other devices' changes stay")
    func revokeDropsPendingAndSecrets() throws {
        let s = try TestStore("revoke-pending", device: desk)
        defer { s.remove() }
        _ = try s.apply([secretOffer("openrouter.apiKey", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: tablet)], from: tablet)
        #expect(secretsFile(s).contains(Self.planted), "held pending, its secret in the backend")

        let dropped = try s.store.forget(device: phone)
        #expect(dropped.pending == 1)
        let doc = try s.store.read().document
        #expect(doc.pending.count == 1 && doc.pending.values.allSatisfy { $0.from == tablet })
        #expect(!secretsFile(s).contains(Self.planted), "the planted secret left the backend with the revoke")

        let done = try s.store.update { tx throws(ConfigError) in try tx.acceptPending(nil, paired: { _ in true }) }
        #expect(done.applied == ["ui.theme"])
        #expect(try s.value("openrouter.apiKey") == nil)
    }

    @Test("config accept skips a pending change from a device that is no longer paired (left by an older version)")
    func acceptSkipsUnpaired() throws {
        let s = try TestStore("accept-unpaired", device: desk)
        defer { s.remove() }
        _ = try s.apply([secretOffer("openrouter.apiKey", ms: s.clock.ms, by: phone)], from: phone)
        _ = try s.apply([update("ui.theme", "dark", ms: s.clock.ms, by: tablet)], from: tablet)
        let paired: Set<DeviceID> = [tablet]
        for keys in [["openrouter.apiKey"], nil] as [[String]?] {
            let done = try s.store.update { tx throws(ConfigError) in try tx.acceptPending(keys, paired: { paired.contains($0) }) }
            #expect(done.unpaired == ["openrouter.apiKey"] && done.superseded.isEmpty)
            #expect(try s.value("openrouter.apiKey") == nil)
        }
        #expect(try s.value("ui.theme") == "\"dark\"")
        #expect(try s.store.update { tx throws(ConfigError) in try tx.rejectPending(nil) } == ["openrouter.apiKey"])
        #expect(!secretsFile(s).contains(Self.planted))
    }
}
