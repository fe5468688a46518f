// Replays every public Noise vector for IK, IKpsk1 and IKpsk2 with SHA-256, byte for byte.
import Testing
import SpeakBridgeCrypto

// The vectors live beside the repository (../shared/vectors/noise); a checkout without them skips this suite.
@Suite("Noise test vectors", .enabled(if: NoiseVectorLoader.isAvailable, "../shared/vectors/noise/ not found"))
struct NoiseVectorTests {
    /// Guards against a loader that silently finds nothing: all three patterns must be covered.
    @Test func vectorsCoverAllPatterns() throws {
        let (vectors, skipped) = try NoiseVectorLoader.load()
        #expect(vectors.count >= 5)
        for pattern in NoiseHandshakePattern.allCases {
            #expect(vectors.contains { $0.pattern == pattern }, "no vector for \(pattern.protocolName)")
        }
        #expect(skipped.allSatisfy { $0.hasSuffix("_BLAKE2b") }, "unexpectedly skipped: \(skipped)")
        #expect(vectors.contains { $0.handshakeHash != nil })
        // Both cipher functions are covered (the browser route speaks AESGCM).
        for cipher in NoiseCipher.allCases {
            #expect(vectors.contains { $0.cipher == cipher }, "no vector for \(cipher.rawValue)")
        }
    }

    @Test(arguments: try NoiseVectorLoader.replayableVectors())
    func replay(vector: NoiseVector) throws {
        // libsodium's AES-GCM needs AES-NI: on a CPU without it the AESGCM vectors cannot run (said, not hidden).
        try #require(vector.cipher.isAvailable, "\(vector.cipher.rawValue) is not available on this CPU")
        try replay(vector, responderUsesResolver: false)
        if vector.pattern.usesPSK {
            // Same bytes when the responder picks the psk through the resolver instead of at init.
            try replay(vector, responderUsesResolver: true)
        }
    }

    private func replay(_ vector: NoiseVector, responderUsesResolver: Bool) throws {
        let pskCount = vector.pattern.usesPSK ? 1 : 0
        try #require(vector.initPSKs.count == pskCount && vector.respPSKs.count == pskCount)
        let initiatorStatic = try X25519PrivateKey(rawRepresentation: vector.initStatic)
        let responderStatic = try X25519PrivateKey(rawRepresentation: vector.respStatic)
        #expect(responderStatic.publicKey.rawRepresentation == vector.initRemoteStatic)

        var initiator = try HandshakeState(
            pattern: vector.pattern, cipher: vector.cipher, role: .initiator, prologue: vector.initPrologue, localStatic: initiatorStatic,
            remoteStatic: X25519PublicKey(rawRepresentation: vector.initRemoteStatic),
            psk: try vector.initPSKs.first.map { try SymmetricKey(bytes: $0) },
            localEphemeral: try X25519PrivateKey(rawRepresentation: vector.initEphemeral))
        let responderPSK = try vector.respPSKs.first.map { try SymmetricKey(bytes: $0) }
        var responder = try HandshakeState(
            pattern: vector.pattern, cipher: vector.cipher, role: .responder, prologue: vector.respPrologue, localStatic: responderStatic,
            psk: responderUsesResolver ? nil : responderPSK,
            localEphemeral: try X25519PrivateKey(rawRepresentation: vector.respEphemeral))
        var resolverCalls: [X25519PublicKey] = []
        let resolver: (X25519PublicKey) throws -> SymmetricKey? = { key in
            resolverCalls.append(key)
            return responderPSK
        }

        var messages = vector.messages[...]
        var fromInitiator = true
        // Handshake phase: the sender writes, the bytes must match, the receiver reads the same payload back.
        while !initiator.isHandshakeComplete {
            let next = messages.popFirst()
            let message = try #require(next, "vector ends before the handshake does")
            if fromInitiator {
                let wire = try initiator.writeMessage(payload: message.payload)
                #expect(wire.hex == message.ciphertext.hex)
                #expect(try responder.readMessage(wire, pskResolver: responderUsesResolver ? resolver : nil)
                        == message.payload)
            } else {
                let wire = try responder.writeMessage(payload: message.payload)
                #expect(wire.hex == message.ciphertext.hex)
                #expect(try initiator.readMessage(wire) == message.payload)
            }
            #expect(initiator.handshakeHash == responder.handshakeHash)
            fromInitiator.toggle()
        }
        #expect(responder.isHandshakeComplete)
        #expect(responder.remoteStaticKey == initiatorStatic.publicKey)
        #expect(resolverCalls == (responderUsesResolver ? [initiatorStatic.publicKey] : []))
        if let expectedHash = vector.handshakeHash {
            #expect(initiator.handshakeHash.hex == expectedHash.hex)
            #expect(responder.handshakeHash.hex == expectedHash.hex)
        }

        // Transport phase: messages keep alternating initiator, responder, ...
        var initiatorTransport = try initiator.transport()
        var responderTransport = try responder.transport()
        #expect(!messages.isEmpty, "vector has no transport messages")
        for message in messages {
            if fromInitiator {
                let wire = try initiatorTransport.encrypt(message.payload)
                #expect(wire.hex == message.ciphertext.hex)
                #expect(try responderTransport.decrypt(wire) == message.payload)
            } else {
                let wire = try responderTransport.encrypt(message.payload)
                #expect(wire.hex == message.ciphertext.hex)
                #expect(try initiatorTransport.decrypt(wire) == message.payload)
            }
            fromInitiator.toggle()
        }
    }
}
