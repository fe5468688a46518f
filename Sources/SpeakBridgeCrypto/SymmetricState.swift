// Noise SymmetricState (spec §5.2): chaining key ck, handshake hash h and a CipherState.

struct SymmetricState: Sendable {
    /// ck: HASHLEN bytes; nil once Split() has run (or after a failure), so it cannot be used again.
    private var ck: SecureBytes?
    /// h: HASHLEN bytes, the handshake hash. Not secret, but binds everything said so far.
    private(set) var h: [UInt8]
    private var cipher: CipherState
    /// The cipher functions named in the protocol name; every CipherState made here uses them.
    let cipherFunctions: NoiseCipher

    /// InitializeSymmetric(protocol_name)
    init(protocolName: String, cipher cipherFunctions: NoiseCipher) {
        self.cipherFunctions = cipherFunctions
        let name = Array(protocolName.utf8)
        // If protocol_name is less than or equal to HASHLEN bytes in length, sets h equal to protocol_name with
        // zero bytes appended to make HASHLEN bytes. Otherwise sets h = HASH(protocol_name).
        if name.count <= NoiseLimits.hashLength {
            h = name + [UInt8](repeating: 0, count: NoiseLimits.hashLength - name.count)
        } else {
            h = SHA256.hash(name)
        }
        // Sets ck = h.
        ck = SecureBytes(h)
        // Calls InitializeKey(empty).
        cipher = CipherState(cipher: cipherFunctions)
    }

    var hasKey: Bool { cipher.hasKey }

    /// MixKey(input_key_material)
    mutating func mixKey(_ inputKeyMaterial: SecureBytes) throws {
        // Sets ck, temp_k = HKDF(ck, input_key_material, 2).
        let outputs = HKDFSHA256.noiseHKDF(chainingKey: try chainingKey(), inputKeyMaterial: inputKeyMaterial,
                                           outputs: 2)
        ck = outputs[0]
        // If HASHLEN is 64, then truncates temp_k to 32 bytes. (HASHLEN is 32 for SHA-256: nothing to do.)
        // Calls InitializeKey(temp_k).
        cipher = try CipherState(key: SymmetricKey(storage: outputs[1]), cipher: cipherFunctions)
    }

    /// MixHash(data): Sets h = HASH(h || data).
    mutating func mixHash(_ data: [UInt8]) {
        h = SHA256.hash(h + data)
    }

    /// MixKeyAndHash(input_key_material): used for psk tokens.
    mutating func mixKeyAndHash(_ inputKeyMaterial: SecureBytes) throws {
        // Sets ck, temp_h, temp_k = HKDF(ck, input_key_material, 3).
        let outputs = HKDFSHA256.noiseHKDF(chainingKey: try chainingKey(), inputKeyMaterial: inputKeyMaterial,
                                           outputs: 3)
        ck = outputs[0]
        // Calls MixHash(temp_h).
        mixHash(outputs[1].copyBytes())
        // If HASHLEN is 64, then truncates temp_k to 32 bytes. (Not for SHA-256.)
        // Calls InitializeKey(temp_k).
        cipher = try CipherState(key: SymmetricKey(storage: outputs[2]), cipher: cipherFunctions)
    }

    /// EncryptAndHash(plaintext): Sets ciphertext = EncryptWithAd(h, plaintext), calls MixHash(ciphertext),
    /// and returns ciphertext. If k is empty, EncryptWithAd() sets ciphertext equal to plaintext.
    mutating func encryptAndHash(_ plaintext: [UInt8]) throws -> [UInt8] {
        // Refuse after Split() or a wipe: an emptied CipherState would otherwise pass plaintext through.
        _ = try chainingKey()
        let ciphertext = try cipher.encryptWithAd(h, plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    /// DecryptAndHash(ciphertext): Sets plaintext = DecryptWithAd(h, ciphertext), calls MixHash(ciphertext),
    /// and returns plaintext. If k is empty, DecryptWithAd() sets plaintext equal to ciphertext.
    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws -> [UInt8] {
        _ = try chainingKey()
        let plaintext = try cipher.decryptWithAd(h, ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// Split(): returns (c1, c2); c1 encrypts initiator-to-responder, c2 responder-to-initiator.
    /// Afterwards ck and k are wiped; only h remains (for GetHandshakeHash()).
    mutating func split() throws -> (CipherState, CipherState) {
        // Sets temp_k1, temp_k2 = HKDF(ck, zerolen, 2).
        let outputs = HKDFSHA256.noiseHKDF(chainingKey: try chainingKey(), inputKeyMaterial: SecureBytes([]),
                                           outputs: 2)
        // If HASHLEN is 64, then truncates temp_k1 and temp_k2 to 32 bytes. (Not for SHA-256.)
        // Creates two new CipherState objects c1 and c2.
        // Calls c1.InitializeKey(temp_k1) and c2.InitializeKey(temp_k2).
        let c1 = try CipherState(key: SymmetricKey(storage: outputs[0]), cipher: cipherFunctions)
        let c2 = try CipherState(key: SymmetricKey(storage: outputs[1]), cipher: cipherFunctions)
        wipe()
        // Returns the pair (c1, c2).
        return (c1, c2)
    }

    /// Drops ck and k; their storage is zeroed once no copy of this state remains.
    mutating func wipe() {
        ck = nil
        cipher.wipe()
    }

    private func chainingKey() throws -> SecureBytes {
        guard let ck else { throw CryptoError.handshakeState("symmetric state already split or wiped") }
        return ck
    }
}
