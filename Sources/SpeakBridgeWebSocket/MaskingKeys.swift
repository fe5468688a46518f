import SpeakBridgeCrypto

/// Masking keys for a client's frames (`ClientFrame`), drawn from a pool of libsodium CSPRNG output refilled 4 KiB
/// (1,024 keys) at a time (`SecureRandom.fillKeystream`: one getrandom(2) of 32 bytes seeds the ChaCha20 keystream
/// that fills it), instead of lws's read(2) of 4 bytes of /dev/urandom per frame.
///
/// RFC 6455 §5.3 asks for a fresh key per frame "derived from a strong source of entropy" that does not let a
/// server or proxy predict the next one (§10.3: so that no one can choose the bytes an intermediary sees). Each
/// key here is 32 bits of that output used once: the ChaCha20 keystream under a fresh secret 256-bit seed from the
/// kernel, so predicting the next key from any number of earlier ones would break ChaCha20, and drawing them 1,024 at
/// a time is as unpredictable as lws's draw of each from /dev/urandom. The pool is in this process's memory only, next to the keys that encrypt the payload.
///
/// One per client connection; touched only on the service thread (like `Connection`), so it needs no lock.
final class MaskingKeys {
    static let poolBytes = 4096
    private let pool: UnsafeMutableRawBufferPointer
    /// Offset of the next unused key; `poolBytes` when the pool must be (re)filled (nothing is drawn before the
    /// first frame).
    private var next = MaskingKeys.poolBytes

    init() {
        pool = .allocate(byteCount: Self.poolBytes, alignment: 8)
        pool.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        pool.deallocate()
    }

    /// Times the pool was filled (one getrandom(2) each), for tests.
    private(set) var refills = 0

    /// A fresh key, used once.
    func take() -> UInt32 {
        if next == Self.poolBytes {
            SecureRandom.fillKeystream(pool)
            refills += 1
            next = 0
        }
        let key = pool.load(fromByteOffset: next, as: UInt32.self)
        next += 4
        return key
    }
}
