#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeStore
import SpeakBridgeSupport

/// The `kind` of a paired device (native or browser) and a browser's short user agent in `state/peers.json`.
@Suite("Peer kinds")
struct PeerKindTests {
    let root = "/tmp/sb-kind-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    @Test func aBrowserDeviceKeepsItsKindAndAgent() throws {
        defer { cleanup() }
        let store = try PeerStore(home: home)
        let key = X25519PrivateKey().publicKey
        try store.upsert(Peer(name: "browser", publicKey: key, psk: SymmetricKey.random(), role: .client,
                              kind: .browser, agent: "Chrome 156 on Android"))
        try store.upsert(Peer(name: "cli", publicKey: X25519PrivateKey().publicKey, psk: SymmetricKey.random(),
                              role: .client))
        let again = try PeerStore(home: home)
        #expect(again.peer(key: key)?.kind == .browser)
        #expect(again.peer(key: key)?.agent == "Chrome 156 on Android")
        #expect(again.find("cli")?.kind == .native)
        #expect(again.find("cli")?.agent == nil)
    }

    @Test func aFileWithoutKindsIsNative() throws {
        defer { cleanup() }
        try home.prepare()
        let key = Hex.encode(X25519PrivateKey().publicKey.rawRepresentation)
        let psk = String(repeating: "ab", count: 32)
        try FileIO.atomicWrite(home.peersFile, Array(#"{"version":1,"peers":[{"name":"x","role":"client","publicKey":"\#(key)","pairedAt":0,"psk":"\#(psk)"}]}"#.utf8))
        #expect(try PeerStore(home: home).all.first?.kind == .native)
    }

    @Test func anUnknownKindIsRefusedNotGuessed() throws {
        defer { cleanup() }
        try home.prepare()
        let key = Hex.encode(X25519PrivateKey().publicKey.rawRepresentation)
        let psk = String(repeating: "ab", count: 32)
        for kind in [#""toaster""#, "1", "null"] {
            try FileIO.atomicWrite(home.peersFile, Array(#"{"version":1,"peers":[{"name":"x","role":"client","publicKey":"\#(key)","pairedAt":0,"kind":\#(kind),"psk":"\#(psk)"}]}"#.utf8))
            #expect(throws: StoreError.self) { try PeerStore(home: home) }
        }
    }
}
