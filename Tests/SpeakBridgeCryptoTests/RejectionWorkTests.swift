import Testing
@testable import SpeakBridgeCrypto

/// Issue 8 row 10: rejecting an unknown initiator key must cost the same work as rejecting a paired key with a
/// wrong psk, so the time a rejection takes does not tell which keys are paired. Checked by counting the steps,
/// not by timing (the benchmark in the protocol tests prints the medians).
@Suite("Noise: rejection does the same work for unknown and paired keys")
struct RejectionWorkTests {
    let peers = NoisePeers(.IKpsk1)

    /// Runs the responder's readMessage on a message 1 from `peers.initiatorStatic` (psk `sentPSK`), with a
    /// resolver that knows that key only when `known`, under `storedPSK`.
    func reject(known: Bool, sentPSK: SymmetricKey, storedPSK: SymmetricKey)
        throws -> (error: CryptoError?, dh: Int, payloads: Int, resolverCalls: Int) {
        var initiator = try peers.initiator(psk: sentPSK)
        let message1 = try initiator.writeMessage(payload: Array("hello".utf8))
        var responder = try peers.responder(withoutPSK: true)
        var calls = 0
        var error: CryptoError?
        do {
            _ = try responder.readMessage(message1) { key in
                calls += 1
                return known && key == peers.initiatorStatic.publicKey ? storedPSK : nil
            }
        } catch let e as CryptoError {
            error = e
        }
        return (error, responder.dhOperations, responder.payloadDecryptions, calls)
    }

    @Test("an unknown key and a paired key with a wrong psk both do es, ss, psk and the payload decryption")
    func sameStepsOnBothRejectionPaths() throws {
        let unknown = try reject(known: false, sentPSK: .random(), storedPSK: .random())
        let wrongPSK = try reject(known: true, sentPSK: .random(), storedPSK: .random())
        let accepted = try reject(known: true, sentPSK: peers.psk, storedPSK: peers.psk)

        #expect(unknown.error == .unknownPeer)
        #expect(wrongPSK.error == .authenticationFailure)
        #expect(accepted.error == nil)
        // IKpsk1 message 1 is `e, es, s, ss, psk`: two DH operations and one payload decryption on every path.
        #expect(unknown.dh == 2 && wrongPSK.dh == 2 && accepted.dh == 2)
        #expect(unknown.payloads == 1 && wrongPSK.payloads == 1 && accepted.payloads == 1)
        #expect(unknown.resolverCalls == 1 && wrongPSK.resolverCalls == 1)
    }

    @Test("an unknown key is reported as unknown even if its psk were the dummy's: the handshake never completes")
    func unknownKeyNeverCompletes() throws {
        var initiator = try peers.initiator()
        let message1 = try initiator.writeMessage(payload: [])
        var responder = try peers.responder(withoutPSK: true)
        #expect(throws: CryptoError.unknownPeer) { _ = try responder.readMessage(message1) { _ in nil } }
        // The failed state is poisoned like any other failure.
        #expect(throws: CryptoError.self) { _ = try responder.writeMessage(payload: []) }
        #expect(!responder.isHandshakeComplete)
    }
}
