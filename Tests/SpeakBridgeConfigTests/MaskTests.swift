import SpeakBridgeConfig
import Testing

@Suite("Secret masking")
struct MaskTests {
    @Test("vendor prefix and the last four characters", arguments: [
        ("dg_4f1c2a9e77b04d1fa3c6e5b8d2079f3a", "dg_…9f3a"),
        ("sk-or-v1-0123456789abcdef41c2", "sk-…41c2"),
        ("a1b2c3d4e5f60718293a4b5c6d7e8f90", "a1…8f90"),
        ("rev_ABCDEFGHIJKLMNOP", "re…MNOP"),
        ("a_ABCDEFGHIJKLMNOP", "a_…MNOP"),
    ])
    func masked(secret: String, expected: String) {
        #expect(SecretMask.mask(secret) == expected)
    }

    @Test("short secrets show nothing but their length")
    func short() {
        #expect(SecretMask.mask("hunter2") == "…(7 chars)")
        #expect(SecretMask.mask("") == "…(0 chars)")
        #expect(SecretMask.mask("0123456789abcde") == "…(15 chars)")
    }

    @Test("never more than seven characters of the secret")
    func bound() {
        for n in 16...80 {
            for s in [String(repeating: "x", count: n), "xxx_" + String(repeating: "x", count: n), "xx-" + String(repeating: "x", count: n)] {
                #expect(SecretMask.mask(s).filter { $0 != "…" }.count <= 7)
            }
        }
    }

    @Test("keys named like credentials are secret by default")
    func looksSecret() {
        for key in ["deepgram.apiKey", "openrouter.api_key", "github.token", "mail.password", "x.clientSecret"] {
            #expect(ConfigKey.looksSecret(key), "\(key)")
        }
        for key in ["transcription.locale", "deepgram.model", "ui.theme"] { #expect(!ConfigKey.looksSecret(key), "\(key)") }
    }
}
