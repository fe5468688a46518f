// Known-answer tests for the libsodium primitives, straight from the RFCs, plus their error paths.
import Testing
import SpeakBridgeCrypto

@Suite("Primitives")
struct PrimitiveTests {
    // RFC 7748 §5.2, first vector: scalar × u-coordinate.
    @Test func x25519RFC7748ScalarMultiplication() throws {
        let scalar = try X25519PrivateKey(rawRepresentation: [UInt8](
            hex: "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"))
        let u = try X25519PublicKey(rawRepresentation: [UInt8](
            hex: "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"))
        let out = try scalar.sharedSecret(with: u)
        #expect(out.copyBytes().hex == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")
    }

    // RFC 7748 §6.1: Alice and Bob's key pairs and shared secret.
    @Test func x25519RFC7748DiffieHellman() throws {
        let alice = try X25519PrivateKey(rawRepresentation: [UInt8](
            hex: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try X25519PrivateKey(rawRepresentation: [UInt8](
            hex: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey.rawRepresentation.hex
                == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(bob.publicKey.rawRepresentation.hex
                == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(try alice.sharedSecret(with: bob.publicKey).copyBytes().hex == shared)
        #expect(try bob.sharedSecret(with: alice.publicKey).copyBytes().hex == shared)
        #expect(alice.rawRepresentation.hex == "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    }

    // Low-order points: 0, 1 and a point of order 8. X25519 with any of them gives all zeros.
    @Test(arguments: [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    ])
    func x25519RejectsLowOrderPoints(point: String) throws {
        let key = X25519PrivateKey()
        let peer = try X25519PublicKey(rawRepresentation: [UInt8](hex: point))
        #expect(throws: CryptoError.weakPublicKey) { try key.sharedSecret(with: peer) }
    }

    @Test func keyLengthsAreChecked() {
        #expect(throws: CryptoError.invalidLength(what: "X25519 public key", expected: 32, actual: 31)) {
            try X25519PublicKey(rawRepresentation: [UInt8](repeating: 9, count: 31))
        }
        #expect(throws: CryptoError.invalidLength(what: "X25519 private key", expected: 32, actual: 33)) {
            try X25519PrivateKey(rawRepresentation: [UInt8](repeating: 9, count: 33))
        }
        #expect(throws: CryptoError.invalidLength(what: "symmetric key", expected: 32, actual: 0)) {
            try SymmetricKey(bytes: [])
        }
    }

    @Test func randomKeysDifferAndAgree() throws {
        let a = X25519PrivateKey(), b = X25519PrivateKey()
        #expect(a.publicKey != b.publicKey)
        #expect(try a.sharedSecret(with: b.publicKey).copyBytes() == b.sharedSecret(with: a.publicKey).copyBytes())
        #expect(SymmetricKey.random().copyBytes() != SymmetricKey.random().copyBytes())
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
        #expect(SecureRandom.bytes(0).isEmpty)
        let secret = SecureBytes(count: 48)
        #expect(secret.count == 48)
        #expect(SecureBytes([1, 2, 3]).copyBytes() == [1, 2, 3])
        #expect(SecureBytes([]).count == 0)
    }

    // RFC 8439 §2.8.2.
    @Test func chaChaPolyRFC8439() throws {
        let key = try SymmetricKey(bytes: Array(0x80...0x9f))
        let nonce = [UInt8](hex: "070000004041424344454647")
        let ad = [UInt8](hex: "50515253c0c1c2c3c4c5c6c7")
        let plaintext = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let expected = "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
            + "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4"
            + "def08e4b7a9de576d26586cec64b6116" + "1ae10b594f09e26a7e902ecbd0600691"
        let sealed = try ChaChaPolyIETF.seal(key: key, nonce: nonce, plaintext: plaintext, ad: ad)
        #expect(sealed.hex == expected)
        #expect(try ChaChaPolyIETF.open(key: key, nonce: nonce, ciphertext: sealed, ad: ad) == plaintext)

        var flipped = sealed
        flipped[5] ^= 0x01
        #expect(throws: CryptoError.authenticationFailure) {
            try ChaChaPolyIETF.open(key: key, nonce: nonce, ciphertext: flipped, ad: ad)
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try ChaChaPolyIETF.open(key: key, nonce: nonce, ciphertext: sealed, ad: [])
        }
        #expect(throws: CryptoError.messageTooShort) {
            try ChaChaPolyIETF.open(key: key, nonce: nonce, ciphertext: Array(sealed.prefix(15)), ad: ad)
        }
        #expect(throws: CryptoError.invalidLength(what: "ChaCha20-Poly1305 nonce", expected: 12, actual: 8)) {
            try ChaChaPolyIETF.seal(key: key, nonce: Array(nonce.prefix(8)), plaintext: plaintext, ad: ad)
        }
    }

    @Test func chaChaPolyEmptyPlaintext() throws {
        let key = SymmetricKey.random()
        let nonce = [UInt8](repeating: 0, count: 12)
        let sealed = try ChaChaPolyIETF.seal(key: key, nonce: nonce, plaintext: [], ad: [])
        #expect(sealed.count == 16)
        #expect(try ChaChaPolyIETF.open(key: key, nonce: nonce, ciphertext: sealed, ad: []) == [])
    }

    @Test func sha256ABC() {
        #expect(SHA256.hash(Array("abc".utf8)).hex
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hash([]).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    // RFC 4231 test case 2: a 4-byte key, which libsodium's one-shot HMAC cannot take.
    @Test func hmacRFC4231Case2() {
        let tag = HMACSHA256.authenticate(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(tag.hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    // RFC 5869 test case 1.
    @Test func hkdfRFC5869Case1() {
        let okm = HKDFSHA256.deriveKey(
            ikm: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9),
            outputByteCount: 42)
        #expect(okm.hex == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        // A shorter output is a prefix of the longer one (same PRK and T(1)).
        let short = HKDFSHA256.deriveKey(
            ikm: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9),
            outputByteCount: 10)
        #expect(short == Array(okm.prefix(10)))
    }

    @Test func constantTimeEquality() {
        #expect(constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEqual([1, 2, 3], [1, 2]))
        #expect(constantTimeEqual([], []))
    }

    @Test func errorDescriptionsAreReadable() {
        #expect(CryptoError.invalidLength(what: "nonce", expected: 12, actual: 8).description
                == "invalid length for nonce: expected 12 bytes, got 8")
        #expect(CryptoError.unknownPeer.description == "unknown peer")
    }
}
