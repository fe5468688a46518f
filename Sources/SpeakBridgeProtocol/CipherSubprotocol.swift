import SpeakBridgeCrypto

// The Noise cipher is chosen by the WebSocket subprotocol: `speakbridge.v1` is the protocol of PROTOCOL.md
// (ChaChaPoly); `speakbridge.v1.aesgcm` is the same protocol with AESGCM as the cipher
// (`Noise_IKpsk1_25519_AESGCM_SHA256`; same pattern, prologues, psk rules, messages). Browsers offer it, because
// WebCrypto has AES-GCM but no ChaCha20-Poly1305. The desktop echoes the subprotocol it chose.
extension SpeakBridgeProtocol {
    /// The AESGCM variant of the subprotocol.
    public static let aesGCMSubprotocol = "speakbridge.v1.aesgcm"

    /// The Noise cipher a negotiated subprotocol selects; nil for a subprotocol that is not ours.
    public static func cipher(forSubprotocol name: String) -> NoiseCipher? {
        switch name {
        case subprotocol: .chaChaPoly
        case aesGCMSubprotocol: .aesGCM
        default: nil
        }
    }

    /// The subprotocol that selects `cipher`.
    public static func subprotocol(for cipher: NoiseCipher) -> String {
        cipher == .aesGCM ? aesGCMSubprotocol : subprotocol
    }
}
