import Testing
@testable import SpeakBridgeCrypto

/// AES-256-GCM messages sealed and opened with the key expanded once per CipherState (`AESGCMKeyState`,
/// libsodium's `_afternm` functions) are byte for byte those of the per-message path
/// (`crypto_aead_aes256gcm_encrypt`/`_decrypt`, which expand the key on every call).
@Suite("Noise AESGCM with a precomputed key state", .enabled(if: AESGCM.isAvailable))
struct AESGCMKeyStateTests {
    static let sizes = [0, 1, 15, 16, 17, 150, 4_096, 65_519]

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The per-message path: libsodium's `crypto_aead_aes256gcm_encrypt` under the spec's AESGCM nonce.
    static func reference(_ key: SymmetricKey, _ n: UInt64, _ plaintext: [UInt8], _ ad: [UInt8]) throws -> [UInt8] {
        try SodiumAEAD.aes256GCM.seal(key: key, nonce: NoiseCipher.aesGCM.nonceBytes(n), plaintext: plaintext, ad: ad)
    }

    @Test func precomputedSealIsThePerMessageSeal() throws {
        let key = SymmetricKey.random()
        let expanded = try #require(try NoiseCipher.aesGCM.expand(key))
        // Passed as k beside the expanded key: only a seal that uses the expanded state gives the right bytes.
        let decoy = SymmetricKey.random()
        for size in Self.sizes {
            let plaintext = Self.randomBytes(size)
            for ad in [[], Self.randomBytes(32)] {
                for n: UInt64 in [0, 1, 0xFFFF_FFFF, 1 << 32, CipherState.maxNonce - 1] {
                    let expected = try Self.reference(key, n, plaintext, ad)
                    let sealed = try NoiseCipher.aesGCM.seal(key: decoy, expanded: expanded, n: n,
                                                             plaintext: plaintext, ad: ad)
                    #expect(sealed == expected, "size \(size), ad \(ad.count), n \(n)")
                    let opened = try NoiseCipher.aesGCM.open(key: decoy, expanded: expanded, n: n,
                                                             ciphertext: expected, ad: ad)
                    #expect(opened == plaintext, "size \(size), ad \(ad.count), n \(n)")
                    #expect(try SodiumAEAD.aes256GCM.open(key: key, nonce: NoiseCipher.aesGCM.nonceBytes(n),
                                                          ciphertext: sealed, ad: ad) == plaintext)
                }
            }
        }
    }

    /// One state, many messages (sealed into new arrays and over the message's own): expanding once leaves nothing
    /// behind that changes a later message.
    @Test func oneStateForManyMessages() throws {
        let key = SymmetricKey.random()
        var sender = try CipherState(key: key, cipher: .aesGCM)
        var receiver = try CipherState(key: key, cipher: .aesGCM)
        #expect(sender.expandedK != nil && receiver.expandedK != nil, "the CipherStates did not keep an expanded key")
        for round in 0..<3 {
            for size in Self.sizes {
                let plaintext = Self.randomBytes(size)
                let ad = round == 1 ? Self.randomBytes(size % 64) : []
                let n = sender.n
                let expected = try Self.reference(key, n, plaintext, ad)
                var frame = plaintext
                if round == 2 {
                    try sender.encryptWithAd(ad, inPlace: &frame)  // NoiseTransport.encrypt(inPlace:)'s path
                } else {
                    frame = try sender.encryptWithAd(ad, plaintext)
                }
                #expect(frame == expected, "round \(round), size \(size)")
                #expect(try receiver.decryptWithAd(ad, frame) == plaintext)
                #expect(sender.n == n + 1 && receiver.n == n + 1)
            }
        }
    }

    /// A flipped bit anywhere in the frame (ciphertext or tag), or other ad, fails authentication and leaves n where
    /// it was (spec §5.1): the genuine frame still opens afterwards.
    @Test func flippedBitFailsWithoutAdvancingTheNonce() throws {
        let key = SymmetricKey.random()
        var sender = try CipherState(key: key, cipher: .aesGCM)
        var receiver = try CipherState(key: key, cipher: .aesGCM)
        let ad = Self.randomBytes(32)
        for size in [0, 1, 17, 150, 4_096] {
            let plaintext = Self.randomBytes(size)
            let frame = try sender.encryptWithAd(ad, plaintext)
            let n = receiver.n
            for bit in [0, 7, frame.count * 4 + 3, size * 8, frame.count * 8 - 1] {
                var flipped = frame
                flipped[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
                #expect(throws: CryptoError.authenticationFailure, "size \(size), bit \(bit)") {
                    try receiver.decryptWithAd(ad, flipped)
                }
                #expect(receiver.n == n, "a failed frame advanced the nonce (size \(size), bit \(bit))")
            }
            #expect(throws: CryptoError.authenticationFailure) { try receiver.decryptWithAd(ad + [0], frame) }
            #expect(receiver.n == n)
            #expect(try receiver.decryptWithAd(ad, frame) == plaintext)
            #expect(receiver.n == n + 1)
        }
    }

    /// ChaChaPoly has nothing to expand, and a wipe drops the expanded key with k.
    @Test func onlyAESGCMExpandsAndWipeDropsIt() throws {
        let key = SymmetricKey.random()
        let chaCha = try CipherState(key: key, cipher: .chaChaPoly)
        #expect(chaCha.hasKey && chaCha.expandedK == nil)
        var aes = try CipherState(key: key, cipher: .aesGCM)
        #expect(aes.hasKey && aes.expandedK != nil)
        aes.wipe()
        #expect(!aes.hasKey && aes.expandedK == nil)
    }

    /// A session's worth of lines each way through two AESGCM transports: every frame opens on the peer, in
    /// order. (Also the workload measured with callgrind: instructions per `NoiseTransport.encrypt`/`decrypt`.)
    @Test func transportLinesOpenInOrder() throws {
        var (initiator, responder) = try NoisePeers(.IKpsk1, cipher: .aesGCM).handshake()
        let line = Array(String(repeating: "a spoken line of about 150 bytes. ", count: 5).utf8.prefix(150))
        for index in 0..<200 {
            var message = line
            message[0] = UInt8(truncatingIfNeeded: index)
            let frame = try initiator.encrypt(message)
            #expect(frame.count == message.count + 16)
            #expect(try responder.decrypt(frame) == message)
            let reply = try responder.encrypt(message)
            #expect(try initiator.decrypt(reply) == message)
        }
    }
}
