// Behaviour of HandshakeState with random peers: agreement, rejection of tampering and misuse, poisoning.
import Testing
import SpeakBridgeCrypto

@Suite("Noise handshake")
struct NoiseHandshakeTests {
    // wireguard-go style: both sides hold the same handshake hash after every message.
    @Test(arguments: NoiseHandshakePattern.allCases)
    func randomPeersAgreeAfterEveryMessage(pattern: NoiseHandshakePattern) throws {
        let peers = NoisePeers(pattern)
        var initiator = try peers.initiator()
        var responder = try peers.responder()
        #expect(initiator.handshakeHash == responder.handshakeHash)

        let message1 = try initiator.writeMessage(payload: Array("hello desktop".utf8))
        #expect(message1.count == NoiseLimits.handshakeMessage1Overhead + 13)
        #expect(try responder.readMessage(message1) == Array("hello desktop".utf8))
        #expect(initiator.handshakeHash == responder.handshakeHash)
        #expect(responder.remoteStaticKey == peers.initiatorStatic.publicKey)
        #expect(!initiator.isHandshakeComplete && !responder.isHandshakeComplete)

        let message2 = try responder.writeMessage(payload: Array("hello phone".utf8))
        #expect(message2.count == NoiseLimits.handshakeMessage2Overhead + 11)
        #expect(responder.isHandshakeComplete)
        #expect(try initiator.readMessage(message2) == Array("hello phone".utf8))
        #expect(initiator.isHandshakeComplete)
        #expect(initiator.handshakeHash == responder.handshakeHash)
        #expect(initiator.handshakeHash.count == NoiseLimits.hashLength)

        var phone = try initiator.transport()
        var desktop = try responder.transport()
        for round in 0..<5 {
            let chunk = Array("chunk \(round)".utf8)
            let sealed = try phone.encrypt(chunk)
            #expect(sealed.count == chunk.count + NoiseLimits.tagLength)
            #expect(try desktop.decrypt(sealed) == chunk)
            #expect(try phone.decrypt(desktop.encrypt(Array("ack \(round)".utf8))) == Array("ack \(round)".utf8))
        }
    }

    @Test func sameKeysDifferentHandshakesDiffer() throws {
        let peers = NoisePeers(.IKpsk1)
        var first = try peers.initiator(), second = try peers.initiator()
        // Fresh ephemerals: two handshakes between the same peers never share bytes or hashes.
        #expect(try first.writeMessage(payload: []) != second.writeMessage(payload: []))
        #expect(first.handshakeHash != second.handshakeHash)
    }

    @Test func protocolNames() {
        #expect(NoiseHandshakePattern.IK.protocolName == "Noise_IK_25519_ChaChaPoly_SHA256")
        #expect(NoiseHandshakePattern.IKpsk1.protocolName == "Noise_IKpsk1_25519_ChaChaPoly_SHA256")
        #expect(NoiseHandshakePattern.IKpsk2.protocolName == "Noise_IKpsk2_25519_ChaChaPoly_SHA256")
        #expect(NoiseHandshakePattern(protocolName: "Noise_IKpsk1_25519_ChaChaPoly_SHA256") == .IKpsk1)
        #expect(NoiseHandshakePattern(protocolName: "Noise_IK_25519_ChaChaPoly_BLAKE2b") == nil)
    }

    // The design's reason for psk1: a wrong psk is rejected on the very first message.
    @Test func wrongPSKRejectedByResponderOnMessage1() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        var responder = try peers.responder(psk: SymmetricKey.random())
        let message1 = try initiator.writeMessage(payload: [])
        #expect(throws: CryptoError.authenticationFailure) { _ = try responder.readMessage(message1) }
        #expect(!responder.isHandshakeComplete)
        #expect(throws: CryptoError.handshakeState("handshake failed earlier")) {
            _ = try responder.writeMessage(payload: [])
        }
    }

    // IKpsk2 mixes the psk only into message 2, so there the initiator is the one that notices.
    @Test func wrongPSKInIKpsk2RejectedByInitiatorOnMessage2() throws {
        let peers = NoisePeers(.IKpsk2)
        var initiator = try peers.initiator()
        var responder = try peers.responder(psk: SymmetricKey.random())
        _ = try responder.readMessage(initiator.writeMessage(payload: []))
        let message2 = try responder.writeMessage(payload: [])
        #expect(throws: CryptoError.authenticationFailure) { _ = try initiator.readMessage(message2) }
    }

    @Test(arguments: NoiseHandshakePattern.allCases)
    func wrongResponderKeyFails(pattern: NoiseHandshakePattern) throws {
        let peers = NoisePeers(pattern)
        var initiator = try peers.initiator(responderKey: X25519PrivateKey().publicKey)
        var responder = try peers.responder()
        let message1 = try initiator.writeMessage(payload: [])
        #expect(throws: CryptoError.authenticationFailure) { _ = try responder.readMessage(message1) }
        #expect(responder.remoteStaticKey == nil)
    }

    // Low-order points in place of the ephemeral key: 0, 1 and a point of order 8.
    @Test(arguments: NoiseHandshakePattern.allCases, [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    ])
    func lowOrderEphemeralRejected(pattern: NoiseHandshakePattern, point: String) throws {
        let peers = NoisePeers(pattern)
        var initiator = try peers.initiator()
        var responder = try peers.responder()
        var message1 = try initiator.writeMessage(payload: [])
        message1.replaceSubrange(0..<NoiseLimits.dhLength, with: [UInt8](hex: point))
        var responderForMessage2 = responder
        #expect(throws: CryptoError.weakPublicKey) { _ = try responder.readMessage(message1) }

        // The same in message 2, towards the initiator.
        var honestInitiator = try peers.initiator()
        _ = try responderForMessage2.readMessage(honestInitiator.writeMessage(payload: []))
        var message2 = try responderForMessage2.writeMessage(payload: [])
        message2.replaceSubrange(0..<NoiseLimits.dhLength, with: [UInt8](hex: point))
        #expect(throws: CryptoError.weakPublicKey) { _ = try honestInitiator.readMessage(message2) }
    }

    // Every byte of both handshake messages (one bit each, cycling through bit positions) is covered by a MAC
    // or the handshake hash. HandshakeState is a value, so each attempt starts from a copy of the same state.
    @Test(arguments: NoiseHandshakePattern.allCases)
    func flippedBitInAnyHandshakeMessageRejected(pattern: NoiseHandshakePattern) throws {
        let peers = NoisePeers(pattern)
        var initiator = try peers.initiator()
        let responderBefore = try peers.responder()
        let message1 = try initiator.writeMessage(payload: Array("payload".utf8))
        for index in message1.indices {
            var tampered = message1
            tampered[index] ^= UInt8(1) << UInt8(index % 8)
            var responder = responderBefore
            #expect(throws: CryptoError.authenticationFailure, "message 1 byte \(index)") {
                _ = try responder.readMessage(tampered)
            }
        }

        var responder = responderBefore
        _ = try responder.readMessage(message1)
        let message2 = try responder.writeMessage(payload: Array("reply".utf8))
        let initiatorBefore = initiator
        for index in message2.indices {
            var tampered = message2
            tampered[index] ^= UInt8(1) << UInt8(index % 8)
            var initiatorCopy = initiatorBefore
            #expect(throws: CryptoError.authenticationFailure, "message 2 byte \(index)") {
                _ = try initiatorCopy.readMessage(tampered)
            }
        }
        // The untampered message still completes the handshake from the saved state.
        var initiatorCopy = initiatorBefore
        #expect(try initiatorCopy.readMessage(message2) == Array("reply".utf8))
    }

    @Test func truncatedHandshakeMessagesRejected() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        let responderBefore = try peers.responder()
        let message1 = try initiator.writeMessage(payload: [])
        #expect(message1.count == NoiseLimits.handshakeMessage1Overhead)
        var responder = responderBefore
        #expect(throws: CryptoError.messageTooShort) { _ = try responder.readMessage(Array(message1.dropLast())) }
        responder = responderBefore
        #expect(throws: CryptoError.authenticationFailure) { _ = try responder.readMessage(message1 + [0]) }
    }

    @Test func resolverPicksPSKFromInitiatorKey() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        var responder = try peers.responder(withoutPSK: true)
        var seen: [X25519PublicKey] = []
        _ = try responder.readMessage(initiator.writeMessage(payload: [])) { key in
            seen.append(key)
            return key == peers.initiatorStatic.publicKey ? peers.psk : nil
        }
        #expect(seen == [peers.initiatorStatic.publicKey])
        _ = try initiator.readMessage(responder.writeMessage(payload: []))
        #expect(initiator.isHandshakeComplete && responder.isHandshakeComplete)
    }

    @Test func resolverReturningNilMeansUnknownPeer() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        var responder = try peers.responder(withoutPSK: true)
        let message1 = try initiator.writeMessage(payload: [])
        #expect(throws: CryptoError.unknownPeer) { _ = try responder.readMessage(message1) { _ in nil } }
        #expect(throws: CryptoError.handshakeState("handshake failed earlier")) {
            _ = try responder.readMessage(message1) { _ in peers.psk }
        }
    }

    @Test func resolverWithWrongPSKFailsAndResolverErrorsPropagate() throws {
        struct StoreDown: Error, Equatable {}
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        let message1 = try initiator.writeMessage(payload: [])
        var responder = try peers.responder(withoutPSK: true)
        #expect(throws: CryptoError.authenticationFailure) {
            _ = try responder.readMessage(message1) { _ in SymmetricKey.random() }
        }
        responder = try peers.responder(withoutPSK: true)
        #expect(throws: StoreDown()) { _ = try responder.readMessage(message1) { _ in throw StoreDown() } }
        responder = try peers.responder(withoutPSK: true)
        #expect(throws: CryptoError.missingPSK) { _ = try responder.readMessage(message1) }
    }

    @Test func oversizeHandshakeMessagesRejected() throws {
        let peers = NoisePeers(.IKpsk1)
        let largestPayload = NoiseLimits.maxMessageLength - NoiseLimits.handshakeMessage1Overhead
        var initiator = try peers.initiator()
        let largest = try initiator.writeMessage(payload: [UInt8](repeating: 7, count: largestPayload))
        #expect(largest.count == NoiseLimits.maxMessageLength)
        var responder = try peers.responder()
        #expect(try responder.readMessage(largest).count == largestPayload)

        var tooBig = try peers.initiator()
        #expect(throws: CryptoError.messageTooLarge) {
            _ = try tooBig.writeMessage(payload: [UInt8](repeating: 7, count: largestPayload + 1))
        }
        #expect(throws: CryptoError.handshakeState("handshake failed earlier")) {
            _ = try tooBig.writeMessage(payload: [])
        }
        var receiver = try peers.responder()
        #expect(throws: CryptoError.messageTooLarge) {
            _ = try receiver.readMessage([UInt8](repeating: 0, count: NoiseLimits.maxMessageLength + 1))
        }
    }

    @Test func outOfOrderCallsRejected() throws {
        let peers = NoisePeers(.IK)
        var responder = try peers.responder()
        #expect(throws: CryptoError.handshakeState("expected to read the peer's message, not write")) {
            _ = try responder.writeMessage(payload: [])
        }
        var initiator = try peers.initiator()
        #expect(throws: CryptoError.handshakeState("expected to write a message, not read")) {
            _ = try initiator.readMessage([UInt8](repeating: 0, count: 64))
        }
        let fresh = try peers.initiator()
        #expect(throws: CryptoError.handshakeState("handshake not complete")) { _ = try fresh.transport() }
    }

    @Test func transportIsHandedOutOnce() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        var responder = try peers.responder()
        _ = try responder.readMessage(initiator.writeMessage(payload: []))
        _ = try initiator.readMessage(responder.writeMessage(payload: []))
        let copy = initiator
        _ = try initiator.transport()
        #expect(throws: CryptoError.handshakeState("transport already taken")) { _ = try initiator.transport() }
        #expect(throws: CryptoError.handshakeState("transport already taken")) { _ = try copy.transport() }
        #expect(throws: CryptoError.handshakeState("handshake already complete")) {
            _ = try responder.writeMessage(payload: [])
        }
    }

    @Test func invalidConfigurationsRejected() throws {
        let key = X25519PrivateKey()
        let peer = X25519PrivateKey().publicKey
        #expect(throws: CryptoError.handshakeState("the IK initiator needs the responder's static key")) {
            _ = try HandshakeState(pattern: .IK, role: .initiator, prologue: [], localStatic: key)
        }
        #expect(throws: CryptoError.handshakeState(
            "the IKpsk1 responder learns the initiator's static key from message 1")) {
            _ = try HandshakeState(pattern: .IKpsk1, role: .responder, prologue: [], localStatic: key,
                                   remoteStatic: peer, psk: .random())
        }
        #expect(throws: CryptoError.missingPSK) {
            _ = try HandshakeState(pattern: .IKpsk1, role: .initiator, prologue: [], localStatic: key,
                                   remoteStatic: peer)
        }
        #expect(throws: CryptoError.handshakeState("IK has no psk token")) {
            _ = try HandshakeState(pattern: .IK, role: .initiator, prologue: [], localStatic: key,
                                   remoteStatic: peer, psk: .random())
        }
    }

    @Test func differentProloguesDoNotAgree() throws {
        let peers = NoisePeers(.IKpsk1)
        var initiator = try peers.initiator()
        var responder = try HandshakeState(pattern: .IKpsk1, role: .responder, prologue: Array("pairing".utf8),
                                           localStatic: peers.responderStatic, psk: peers.psk)
        let message1 = try initiator.writeMessage(payload: [])
        #expect(throws: CryptoError.authenticationFailure) { _ = try responder.readMessage(message1) }
    }
}
