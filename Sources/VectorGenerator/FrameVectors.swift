// frames.json: one transport frame for every message type (plaintext JSON as the package encodes it, and its
// ciphertext under a fixed key with nonces 0, 1, 2, …), plus plaintexts that receivers must accept and plaintexts
// they must refuse, with the error code the desktop answers (a client `error` it cannot parse is not answered: closed).
import SpeakBridgeCrypto
import SpeakBridgeProtocol

enum FrameVectors {
    static let session = HandshakeVectors.session

    /// Noise's ChaChaPoly nonce: 4 zero bytes, then the 64-bit counter little-endian (Noise spec §12.3).
    static func nonce(_ n: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: n >> (8 * UInt64($0))) }
    }

    static let messages: [(String, Message)] = [
        ("pair (handshake message 1 payload, pairing)", .pair(name: "pixel")),
        ("pair-accept (handshake message 2 payload, pairing)", .pairAccept(name: "desk", id: "0000-0000-0000-0000")),
        ("pair-confirm", .pairConfirm),
        ("paired", .paired),
        ("hello (handshake message 1 payload, session)", .hello(agent: "speakbridge-cli/0.1")),
        ("welcome (handshake message 2 payload, session)", .welcome),
        ("resume from the client", .resume(session: session, delivered: nil)),
        ("resume from the desktop", .resume(session: session, delivered: 41)),
        ("chunk, required fields", .chunk(session: session, Chunk(seq: 42, text: "Hello, world."))),
        ("chunk, every field", .chunk(session: session, Chunk(seq: 43, text: "Grüße, \"quoted\"\tand a line\nbreak",
                                                                final: false, lang: "de-AT", speaker: "S1",
                                                                start: 12.5, end: 14.25))),
        ("chunks", .chunks(session: session, [Chunk(seq: 44, text: "one"), Chunk(seq: 45, text: "two"),
                                              Chunk(seq: 46, text: "three")])),
        ("ack", .ack(session: session, seq: 46)),
        ("bye", .bye),
        ("error", .error(code: .unknownType, message: "unknown message type \"teleport\"", expected: nil)),
        ("error with expected", .error(code: .gap, message: "expected 47", expected: 47)),
        ("held (a sink holds the session from seq on)",
         .held(HeldNotice(session: session, seq: 47, sink: "type", reason: "xdotool: cannot open display"))),
    ]

    static func document() throws -> JSONValue {
        let key = try SymmetricKey(bytes: FixedKeys.transportKey)
        var frames: [JSONValue] = []
        for (n, (description, message)) in messages.enumerated() {
            let plaintext = MessageCodec.encode(message)
            try require(try MessageCodec.decode(plaintext) == message, "\(description) round-trips")
            let ciphertext = try ChaChaPolyIETF.seal(key: key, nonce: nonce(UInt64(n)), plaintext: plaintext, ad: [])
            frames.append(.object([
                ("description", description.json),
                ("type", message.type.json),
                ("nonce", .integer(Int64(n))),
                ("plaintext", plaintext.utf8Text.json),
                ("ciphertext", ciphertext.hexJSON),
            ]))
        }

        var accepted: [JSONValue] = []
        for (description, text) in acceptedPlaintexts {
            let message = try MessageCodec.decode(Array(text.utf8))
            accepted.append(.object([
                ("description", description.json),
                ("plaintext", text.json),
                ("type", message.type.json),
                ("canonical", MessageCodec.encode(message).utf8Text.json),
            ]))
        }

        var rejected: [JSONValue] = []
        for (description, bytes, intended) in rejectedPlaintexts() {
            let code: String
            do {
                _ = try MessageCodec.decode(bytes)
                throw GeneratorError("\"\(description)\" was accepted")
            } catch let error as MessageError {
                code = error.code.rawValue
            }
            try require(code == intended, "\"\(description)\": expected \(intended), the codec says \(code)")
            var members: [(String, JSONValue)] = [("description", description.json)]
            if let text = String(validating: bytes, as: UTF8.self) {
                members.append(("plaintext", text.json))
            } else {
                members.append(("plaintext_hex", bytes.hexJSON))
            }
            members.append(("error", code.json))
            rejected.append(.object(members))
        }

        return .object([
            ("description", "SpeakBridge protocol v1 transport frames; see Pairing/PROTOCOL.md, \"Messages\"".json),
            ("key", FixedKeys.transportKey.hexJSON),
            ("nonce_encoding", "4 zero bytes || uint64 little-endian counter; associated data empty".json),
            ("frames", .array(frames)),
            ("accepted", .array(accepted)),
            ("rejected", .array(rejected)),
        ])
    }

    static let acceptedPlaintexts: [(String, String)] = [
        ("unknown fields are ignored", #"{"type":"bye","future":{"nested":[1,2,3]}}"#),
        ("members in any order, whitespace between tokens",
         " {\"seq\" : 7 ,\n \"text\" : \"x\", \"session\":\"s\",\"type\":\"chunk\"} "),
        ("final absent means true", #"{"type":"chunk","session":"s","seq":1,"text":"a"}"#),
        ("null optional fields count as absent",
         #"{"type":"chunk","session":"s","seq":1,"text":"a","final":null,"lang":null,"start":null}"#),
        ("integer seconds", #"{"type":"chunk","session":"s","seq":1,"text":"a","start":0,"end":3}"#),
        ("escapes and a surrogate pair", #"{"type":"chunk","session":"s","seq":1,"text":"\u00e9\ud83d\ude00\/\b\f"}"#),
        ("ack of 0", #"{"type":"ack","session":"s","seq":0}"#),
        ("largest sequence number, 2^53", #"{"type":"ack","session":"s","seq":9007199254740992}"#),
        ("pair without a name", #"{"type":"pair"}"#),
        ("hello without an agent", #"{"type":"hello"}"#),
        ("error without a message", #"{"type":"error","code":"internal"}"#),
        ("64-character session ID", "{\"type\":\"resume\",\"session\":\"\(String(repeating: "a", count: 64))\"}"),
        ("nesting of 8 levels", #"{"type":"bye","x":[[[[[[{}]]]]]]}"#),
        ("a config- type (reserved for config transfer) is parsed, members kept in order",
         #"{"type":"config-offer","keys":["ui.theme"],"clock":7}"#),
        // The canonical encoding (PROTOCOL.md, "Canonical encoding"): which scalars are written as \uXXXX, each
        // class at its edges, and what stays raw next to them (U+00A0, U+200D, U+2027, U+202F, U+2065, U+206A).
        ("canonical escapes: C0, DEL, C1, bidi controls and U+2028/9 as \\uXXXX, their neighbours raw",
         "{\"type\":\"chunk\",\"session\":\"s\",\"seq\":1,\"text\":\"\\u0001\\u001f\u{7F}~\u{80}\u{85}\u{9B}\u{9F}\u{A0}é"
            + "\u{61B}\u{61C}\u{61D}\u{200D}\u{200E}\u{200F}\u{2027}\u{2028}\u{2029}\u{202A}\u{202E}\u{202F}"
            + "\u{2065}\u{2066}\u{2069}\u{206A}€😀/\"}"),
        ("canonical escapes in other string members too (a batched chunk's speaker)",
         "{\"type\":\"chunks\",\"session\":\"s\",\"chunks\":[{\"seq\":1,\"text\":\"\u{2066}x\u{2069}\","
            + "\"speaker\":\"\u{202E}S\u{85}\"}]}"),
        ("canonical numbers: exponential below 0.0001, positional from there",
         #"{"type":"chunk","session":"s","seq":1,"text":"a","start":0.00001,"end":0.0001}"#),
        ("canonical numbers: positional up to 2^53, exponential above",
         #"{"type":"chunk","session":"s","seq":1,"text":"a","start":9007199254740992,"end":9100000000000000}"#),
        ("canonical numbers: 1e15 positional, 1e16 exponential, shortest digits",
         #"{"type":"chunk","session":"s","seq":1,"text":"a","start":1e15,"end":1.5E16}"#),
        ("canonical numbers: shortest round-trip digits",
         #"{"type":"chunk","session":"s","seq":1,"text":"a","start":0.1000000000000000055511151231257827,"end":123456.789e3}"#),
    ]

    static func rejectedPlaintexts() -> [(String, [UInt8], String)] {
        func t(_ description: String, _ text: String, _ error: String) -> (String, [UInt8], String) {
            (description, Array(text.utf8), error)
        }
        let longText = String(repeating: "a", count: SpeakBridgeProtocol.maxChunkTextBytes + 1)
        let manyChunks = (1...(SpeakBridgeProtocol.maxChunksPerBatch + 1)).map { "{\"seq\":\($0),\"text\":\"\"}" }
            .joined(separator: ",")
        return [
            t("not JSON", "hello", "malformed"),
            t("empty", "", "malformed"),
            t("not an object", #"["type","bye"]"#, "malformed"),
            t("no type", #"{"session":"s"}"#, "malformed"),
            t("type is not a string", #"{"type":1}"#, "malformed"),
            t("unknown type", #"{"type":"teleport","to":"mars"}"#, "unknown-type"),
            t("type in another case", #"{"type":"BYE"}"#, "unknown-type"),
            t("config- type longer than 32 bytes", "{\"type\":\"config-\(String(repeating: "x", count: 26))\"}",
              "unknown-type"),
            t("duplicate key", #"{"type":"bye","type":"chunk"}"#, "malformed"),
            t("nesting of 9 levels", #"{"type":"bye","x":[[[[[[[{}]]]]]]]}"#, "malformed"),
            t("trailing data", #"{"type":"bye"} {}"#, "malformed"),
            t("lone surrogate", #"{"type":"pair","name":"\ud800"}"#, "malformed"),
            ("invalid UTF-8 in a string", Array(#"{"type":"pair","name":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8),
             "malformed"),
            t("raw control character in a string", "{\"type\":\"pair\",\"name\":\"a\u{1}b\"}", "malformed"),
            t("NaN is not JSON", #"{"type":"chunk","session":"s","seq":1,"text":"a","start":NaN}"#, "malformed"),
            t("number out of range", #"{"type":"chunk","session":"s","seq":1,"text":"a","start":1e400}"#, "malformed"),
            t("single quotes", #"{'type':'bye'}"#, "malformed"),
            t("seq 0 in a chunk", #"{"type":"chunk","session":"s","seq":0,"text":"a"}"#, "malformed"),
            t("seq above 2^53", #"{"type":"chunk","session":"s","seq":9007199254740993,"text":"a"}"#, "malformed"),
            t("seq with a fraction", #"{"type":"chunk","session":"s","seq":1.0,"text":"a"}"#, "malformed"),
            t("seq as a string", #"{"type":"chunk","session":"s","seq":"1","text":"a"}"#, "malformed"),
            t("negative seq", #"{"type":"ack","session":"s","seq":-1}"#, "malformed"),
            t("chunk without text", #"{"type":"chunk","session":"s","seq":1}"#, "malformed"),
            t("text over 16384 bytes", "{\"type\":\"chunk\",\"session\":\"s\",\"seq\":1,\"text\":\"\(longText)\"}",
              "too-large"),
            t("final is not a boolean", #"{"type":"chunk","session":"s","seq":1,"text":"a","final":"yes"}"#,
              "malformed"),
            t("negative start", #"{"type":"chunk","session":"s","seq":1,"text":"a","start":-1}"#, "malformed"),
            t("lang over 35 bytes",
              "{\"type\":\"chunk\",\"session\":\"s\",\"seq\":1,\"text\":\"a\",\"lang\":\"\(String(repeating: "x", count: 36))\"}",
              "too-large"),
            t("empty session ID", #"{"type":"resume","session":""}"#, "malformed"),
            t("session ID with a slash", #"{"type":"resume","session":"../etc"}"#, "malformed"),
            t("65-character session ID", "{\"type\":\"resume\",\"session\":\"\(String(repeating: "a", count: 65))\"}",
              "malformed"),
            t("empty batch", #"{"type":"chunks","session":"s","chunks":[]}"#, "malformed"),
            t("batch with a gap", #"{"type":"chunks","session":"s","chunks":[{"seq":1,"text":"a"},{"seq":3,"text":"b"}]}"#,
              "malformed"),
            t("batch of 513", "{\"type\":\"chunks\",\"session\":\"s\",\"chunks\":[\(manyChunks)]}", "too-large"),
            t("ack without seq", #"{"type":"ack","session":"s"}"#, "malformed"),
            t("name over 64 bytes", "{\"type\":\"pair\",\"name\":\"\(String(repeating: "n", count: 65))\"}", "too-large"),
            t("pair-accept without id", #"{"type":"pair-accept","name":"desk"}"#, "malformed"),
            t("agent over 128 bytes", "{\"type\":\"hello\",\"agent\":\"\(String(repeating: "g", count: 129))\"}",
              "too-large"),
            t("error without code", #"{"type":"error","message":"x"}"#, "malformed"),
            t("expected of 0", #"{"type":"error","code":"gap","expected":0}"#, "malformed"),
            t("held at seq 0", #"{"type":"held","session":"s","seq":0,"sink":"type","reason":"x"}"#, "malformed"),
            t("held without sink", #"{"type":"held","session":"s","seq":1,"reason":"x"}"#, "malformed"),
            t("held reason over 512 bytes",
              "{\"type\":\"held\",\"session\":\"s\",\"seq\":1,\"sink\":\"type\",\"reason\":\"\(String(repeating: "r", count: 513))\"}",
              "too-large"),
        ]
    }
}
