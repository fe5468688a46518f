import SpeakBridgeCrypto
import Testing
@testable import SpeakBridgeProtocol

/// Issue 8 row 13 (pairing secret): the secret lives in self-wiping storage in the code, the initiator and the
/// derivation of the per-pair psk; the byte views are copies.
@Suite("Pairing secret in self-wiping storage")
struct PairingSecretStorageTests {
    let key = [UInt8](repeating: 7, count: 32)

    @Test("a code made from a key carries it; equality compares the secret")
    func codeFromKey() throws {
        let secret = SymmetricKey.random()
        let code = try PairingCode(publicKey: key, secretKey: secret, expiry: 1, port: 2, addresses: [])
        #expect(code.secretKey == secret)
        #expect(code.secret == secret.copyBytes())
        let parsed = try PairingCode.parse(code.encoded())
        #expect(parsed == code)
        #expect(parsed.secretKey == secret)
        var other = parsed
        other.secret = SecureRandom.bytes(32)
        #expect(other != code)
        other.secret = [1, 2, 3]
        #expect(other.secretKey == nil)
        #expect(throws: PairingCodeError.invalidLength(field: "secret")) { try other.validate() }
    }

    @Test("the key-to-key derivation of the per-pair psk equals the byte one (the vectors' form)")
    func derivationAgrees() {
        let secret = SymmetricKey.random()
        let hash = SecureRandom.bytes(32)
        let asKey = KeySchedule.sessionPSK(pairingSecret: secret, pairingHandshakeHash: hash)
        let asBytes: [UInt8] = KeySchedule.sessionPSK(pairingSecret: secret.copyBytes(), pairingHandshakeHash: hash)
        #expect(asKey.copyBytes() == asBytes)
    }

    @Test("both sides of a pairing derive the same per-pair psk from a SymmetricKey secret")
    func pairingWithKeySecret() throws {
        let desktop = X25519PrivateKey()
        let phone = X25519PrivateKey()
        let secret = SymmetricKey.random()
        var r = ResponderMachine(intent: .pair, context: ResponderContext(
            localStatic: desktop, localName: "desk", pairingSecret: { secret }, sessionPSK: { _ in nil },
            delivered: { _, _ in 0 }))
        var i = try InitiatorMachine(intent: .pair, localStatic: phone, desktopKey: desktop.publicKey, psk: secret,
                                     firstMessage: .pair(name: "p"))
        func sent<A>(_ actions: [A], _ pick: (A) -> [UInt8]?) -> [UInt8]? { actions.compactMap(pick).first }
        let m2 = try #require(sent(r.receive(try i.start())) { if case .send(let f) = $0 { f } else { nil } })
        let confirm = try #require(sent(i.receive(m2)) { if case .send(let f) = $0 { f } else { nil } })
        let a = r.receive(confirm)
        var desktopKey: SymmetricKey?
        for case .pairingConfirmed(let outcome) in a { desktopKey = outcome.sessionKey }
        let paired = try #require(sent(a) { if case .send(let f) = $0 { f } else { nil } })
        var phoneKey: SymmetricKey?
        for case .paired(let result) in i.receive(paired) { phoneKey = result.sessionKey }
        #expect(desktopKey != nil && desktopKey == phoneKey)
        #expect(desktopKey != secret)
    }
}
