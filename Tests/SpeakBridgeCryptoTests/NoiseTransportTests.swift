// Transport phase: tampering, replay, reordering and size limits after a real handshake.
import Testing
import SpeakBridgeCrypto

@Suite("Noise transport")
struct NoiseTransportTests {
    @Test func flippedBitInTransportMessageRejected() throws {
        var (phone, desktopBefore) = try NoisePeers(.IKpsk1).handshake()
        let sealed = try phone.encrypt(Array("dictated text".utf8))
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= UInt8(1) << UInt8(index % 8)
            var desktop = desktopBefore
            #expect(throws: CryptoError.authenticationFailure, "byte \(index)") { _ = try desktop.decrypt(tampered) }
            // A failed transport stays failed, even for the genuine message.
            #expect(throws: CryptoError.handshakeState("transport unusable after an earlier failure")) {
                _ = try desktop.decrypt(sealed)
            }
        }
        #expect(try desktopBefore.decrypt(sealed) == Array("dictated text".utf8))
    }

    @Test func replayedTransportMessageRejected() throws {
        var (phone, desktop) = try NoisePeers(.IKpsk1).handshake()
        let first = try phone.encrypt(Array("one".utf8))
        #expect(try desktop.decrypt(first) == Array("one".utf8))
        #expect(throws: CryptoError.authenticationFailure) { _ = try desktop.decrypt(first) }
    }

    @Test func reorderedTransportMessagesRejected() throws {
        var (phone, desktop) = try NoisePeers(.IK).handshake()
        _ = try phone.encrypt(Array("one".utf8))
        let second = try phone.encrypt(Array("two".utf8))
        #expect(throws: CryptoError.authenticationFailure) { _ = try desktop.decrypt(second) }
    }

    @Test func directionsUseDifferentKeys() throws {
        var (phone, desktop) = try NoisePeers(.IKpsk1).handshake()
        let fromPhone = try phone.encrypt(Array("same".utf8))
        let fromDesktop = try desktop.encrypt(Array("same".utf8))
        #expect(fromPhone != fromDesktop)
        // A message reflected back to its sender does not decrypt.
        #expect(throws: CryptoError.authenticationFailure) { _ = try phone.decrypt(fromPhone) }
    }

    @Test func transportSizeLimits() throws {
        var (phone, desktop) = try NoisePeers(.IKpsk1).handshake()
        let largest = try phone.encrypt([UInt8](repeating: 1, count: NoiseLimits.maxTransportPayloadLength))
        #expect(largest.count == NoiseLimits.maxMessageLength)
        #expect(try desktop.decrypt(largest).count == NoiseLimits.maxTransportPayloadLength)

        // Too large to send: rejected without using up a nonce, so the next message still decrypts.
        #expect(throws: CryptoError.messageTooLarge) {
            _ = try phone.encrypt([UInt8](repeating: 1, count: NoiseLimits.maxTransportPayloadLength + 1))
        }
        #expect(try desktop.decrypt(phone.encrypt([42])) == [42])

        var receiver = desktop
        #expect(throws: CryptoError.messageTooLarge) {
            _ = try receiver.decrypt([UInt8](repeating: 0, count: NoiseLimits.maxMessageLength + 1))
        }
        receiver = desktop
        #expect(throws: CryptoError.messageTooShort) {
            _ = try receiver.decrypt([UInt8](repeating: 0, count: NoiseLimits.tagLength - 1))
        }
        #expect(try desktop.decrypt(phone.encrypt([])) == [])
    }
}
