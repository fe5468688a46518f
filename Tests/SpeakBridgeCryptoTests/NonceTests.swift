import Testing
@testable import SpeakBridgeCrypto

/// The stack-built nonce that seal/open use is byte for byte the spec's nonce (`nonceBytes`, §12.3/§12.4).
@Suite("Noise nonce built on the stack")
struct NonceTests {
    @Test(arguments: NoiseCipher.allCases)
    func stackNonceIsTheSpecNonce(cipher: NoiseCipher) {
        for n: UInt64 in [0, 1, 255, 256, 0x0102_0304, 1 << 32, 0x0102_0304_0506_0708, .max - 1] {
            let stack = cipher.withNonce(n) { Array($0) }
            #expect(stack == cipher.nonceBytes(n), "n = \(n)")
        }
    }
}
