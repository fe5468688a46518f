import SpeakBridgeCrypto
import SpeakBridgeProtocol

/// This installation's long-term X25519 key pair: created on first use, stored 0600 as 64 hex characters.
public struct Identity: Sendable {
    public let privateKey: X25519PrivateKey
    public var publicKey: X25519PublicKey { privateKey.publicKey }
    public var deviceID: DeviceID { KeySchedule.deviceID(of: publicKey) }

    public static func loadOrCreate(_ home: Home) throws(StoreError) -> Identity {
        try home.prepare()
        let path = home.identityFile
        if var bytes = try FileIO.read(path, leaked: "delete it and pair every device again (a new identity is created)") {
            defer { SecretMemory.wipe(&bytes) }
            let text = TextTrim.whitespaceAndNewlines(String(decoding: bytes, as: UTF8.self))
            guard let raw = Hex.decode(text), let key = try? X25519PrivateKey(rawRepresentation: raw) else {
                throw StoreError("\(path) is not a SpeakBridge identity key",
                                 hint: "move it away; a new identity is created on the next start (pairings must be redone)")
            }
            return Identity(privateKey: key)
        }
        let key = X25519PrivateKey()
        try FileIO.atomicWrite(path, Array((Hex.encode(key.rawRepresentation) + "\n").utf8))
        return Identity(privateKey: key)
    }
}

import FoundationEssentials
import SpeakBridgeSupport
