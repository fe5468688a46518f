import Testing
@testable import SpeakBridgeCrypto

/// Sealing over the message's own array gives exactly the bytes of sealing into a new one, and they open.
@Suite("Noise seal in place")
struct SealInPlaceTests {
    @Test(arguments: NoiseCipher.allCases.filter(\.isAvailable))
    func inPlaceIsTheSameFrame(cipher: NoiseCipher) throws {
        let key = SymmetricKey.random()
        var generator = SystemRandomNumberGenerator()
        // Both sides of `ByteArrays.stackLimit`: sealed (size + 16) and opened (size) arrays of 4,096 and 4,097 bytes.
        for size in [0, 1, 15, 16, 17, 100, 1_000, 4_079, 4_080, 4_081, 4_096, 4_097, 10_000, 65_519] {
            let plaintext = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            for n: UInt64 in [0, 1, 77, 1 << 40] {
                let sealed = try cipher.seal(key: key, n: n, plaintext: plaintext, ad: [])
                var buffer = plaintext
                try cipher.sealInPlace(key: key, n: n, buffer: &buffer, ad: [])
                #expect(buffer == sealed, "size \(size), n \(n)")
                #expect(try cipher.open(key: key, n: n, ciphertext: buffer, ad: []) == plaintext)
            }
        }
    }

    /// Through the transport: frames sealed in place and in new arrays alternate on one session, and the peer
    /// opens every one in order (the nonce advances the same way on both paths).
    @Test func transportFramesOpenInOrder() throws {
        var (initiator, responder) = try NoisePeers(.IKpsk1).handshake()
        for index in 0..<50 {
            let message = Array("message \(index)".utf8)
            let frame: [UInt8]
            if index % 2 == 0 {
                var bytes = message
                try initiator.encrypt(inPlace: &bytes)
                frame = bytes
            } else {
                frame = try initiator.encrypt(message)
            }
            #expect(frame.count == message.count + 16)
            #expect(try responder.decrypt(frame) == message)
        }
        var tooLarge = [UInt8](repeating: 0, count: NoiseLimits.maxTransportPayloadLength + 1)
        #expect(throws: CryptoError.self) { try initiator.encrypt(inPlace: &tooLarge) }
        #expect(try responder.decrypt(try initiator.encrypt([1, 2, 3])) == [1, 2, 3], "a refused size took no nonce")
    }
}
