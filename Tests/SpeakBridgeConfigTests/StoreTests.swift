import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

@Suite("Config store files")
struct StoreTests {
    @Test("settings and secrets are 0600; secret values live only in the secret backend")
    func files() throws {
        let s = try TestStore("files", device: device(1))
        defer { s.remove() }
        try s.set("deepgram.apiKey", .string("dg_0123456789abcdef9f3a"), secret: true)
        try s.set("transcription.locale", .string("en-US"))
        #expect(FileIO.mode(s.home.settingsFile) == 0o600)
        #expect(FileIO.mode(s.home.config + "/secrets.json") == 0o600)
        let settings = String(decoding: s.fileBytes, as: UTF8.self)
        #expect(!settings.contains("dg_0123456789abcdef9f3a"))
        #expect(settings.contains("en-US"))
        #expect(s.store.secrets.summary.hasPrefix("file (0600) "))
        // Replacing a secret prunes the old value.
        try s.set("deepgram.apiKey", .string("dg_ffffffffffffffff0000"))
        let secrets = String(decoding: try FileIO.read(s.home.config + "/secrets.json") ?? [], as: UTF8.self)
        #expect(!secrets.contains("dg_0123456789abcdef9f3a") && secrets.contains("dg_ffffffffffffffff0000"))
    }

    @Test("a change that throws writes nothing")
    func failedChange() throws {
        let s = try TestStore("fail", device: device(1))
        defer { s.remove() }
        try s.set("a", .integer(1))
        let before = s.fileBytes
        #expect(throws: ConfigError.self) {
            try s.store.update { tx throws(ConfigError) in
                try tx.set("b", .integer(2))
                try tx.set("devices.x", .integer(3))
            }
        }
        #expect(s.fileBytes == before)
        #expect(try s.value("b") == nil)
    }

    @Test("a secret file readable by others is refused")
    func looseMode() throws {
        let s = try TestStore("mode", device: device(1))
        defer { s.remove() }
        try s.set("x.token", .string("tok_0123456789abcdef0000"))
        chmod(s.home.config + "/secrets.json", 0o644)
        #expect(throws: ConfigError.self) { _ = try s.value("x.token") }
    }

    @Test("values typed on the command line get their natural type")
    func parsing() throws {
        #expect(try ConfigValue(parsing: "true", key: "k") == .bool(true))
        #expect(try ConfigValue(parsing: "42", key: "k") == .integer(42))
        #expect(try ConfigValue(parsing: "0.5", key: "k") == .double(0.5))
        #expect(try ConfigValue(parsing: "en-US", key: "k") == .string("en-US"))
        #expect(try ConfigValue(parsing: "42", key: "k", forceString: true) == .string("42"))
        #expect(try ConfigValue(parsing: "1.2.3", key: "k") == .string("1.2.3"))
        #expect(throws: ConfigError.self) { try ConfigValue(parsing: "a\u{1B}b", key: "k") }
    }

    @Test("the document survives a save and load unchanged")
    func reload() throws {
        let s = try TestStore("reload", device: device(1))
        defer { s.remove() }
        try s.set("a", .double(1.5))
        try s.set("b.apiKey", .string("sk-0123456789abcdef0000"))
        try s.store.update { tx throws(ConfigError) in
            tx.document.policy.devices[device(2)] = .deny
            tx.document.policy.share = .publicOnly
            try tx.setLocalOnly("a", true)
            try tx.unset("a")
        }
        let first = try s.store.read().document
        let again = try ConfigStore(home: s.home, device: device(1), secrets: s.store.secrets, now: { 0 }).read().document
        #expect(first == again)
        #expect(again.policy.devices[device(2)] == .deny)
        #expect(again.records["a"]?.isDeleted == true)
    }
}
