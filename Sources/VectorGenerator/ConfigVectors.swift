// config.json: config transfer, message by message. Each case gives one side's state (share mode, consent policy,
// keys, items staged for the peer), the frames its peer sends, and what the side answers, as plaintexts. The
// answers are computed by the package's own ConfigMachine and ConfigShell on a real store in a temporary home
// (file secret backend, clock fixed at 2026-01-01T00:00:00Z), so they are what the reference desktop and client do.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeConfig
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore

enum ConfigVectors {
    static let now: UInt64 = 1_767_225_600_000
    static let desktop = KeySchedule.deviceID(of: FixedKeys.desktopStatic.publicKey)
    static let client = KeySchedule.deviceID(of: FixedKeys.clientStatic.publicKey)

    struct Case {
        var name: String
        var description: String
        var role: ConfigMachine.Role = .desktop
        var share: ShareMode = .publicOnly
        var policy: ConsentPolicy = .accept
        var keys: [(String, ConfigValue, Bool)] = []
        var staged: [(String, StagedOutbox.Item.Kind, [String]?)] = []
        /// Device role: what its user asked for.
        var start: [ConfigMachine.Request] = []
        /// Frames of the peer, in order.
        var inputs: [String] = []
        /// A check of the answers (each answer list belongs to the input at the same index).
        var expect: ([[String]]) -> Bool = { _ in true }
    }

    /// A version written by `writer` at `now`.
    static func version(_ writer: DeviceID) -> String { "\(now):0:\(writer.compact)" }

    static var cases: [Case] {
        let secretAndLocale: [(String, ConfigValue, Bool)] = [("deepgram.apiKey", .string("dg_0123456789abcdef9f3a"), true),
                                                               ("transcription.locale", .string("de-CH"), false)]
        let entry = #"{"key":"ui.theme","version":"\#(version(client))","value":"dark"}"#
        let desktopEntry = #"{"key":"ui.theme","version":"\#(version(desktop))","value":"dark"}"#
        return [
            Case(name: "pull-share-public",
                 description: "A pull without keys under share mode public: every key but the secrets, and how many were withheld.",
                 keys: secretAndLocale, inputs: [#"{"type":"config-pull","batch":"b-1"}"#],
                 expect: { $0[0].count == 1 && $0[0][0].contains(#""withheld":1"#) }),
            Case(name: "pull-share-all",
                 description: "The same pull under share mode all (chosen on this machine): secrets too.",
                 share: .all, keys: secretAndLocale, inputs: [#"{"type":"config-pull","batch":"b-1"}"#],
                 expect: { $0[0].count == 1 && $0[0][0].contains("deepgram.apiKey") }),
            Case(name: "pull-keys-empty",
                 description: "keys [] asks for no key: the empty answer. (Absent or null keys ask for everything shared.)",
                 share: .all, keys: secretAndLocale, inputs: [#"{"type":"config-pull","batch":"b-2","keys":[]}"#],
                 expect: { $0[0].first?.contains(#""entries":[]}"#) == true }),
            Case(name: "empty-answer",
                 description: "Nothing to send: one part with no entries (withheld counts the secrets share mode public left out).",
                 keys: [("openrouter.token", .string("or-0123456789"), true)],
                 inputs: [#"{"type":"config-pull","batch":"b-3"}"#],
                 expect: { $0[0].first?.contains(#""entries":[],"withheld":1}"#) == true }),
            Case(name: "pull-share-none",
                 description: "Share mode none: config-error denied, naming the batch.",
                 share: .none, keys: secretAndLocale, inputs: [#"{"type":"config-pull","batch":"b-4"}"#],
                 expect: { $0[0].first?.contains(#""code":"denied""#) == true }),
            Case(name: "batch-format",
                 description: "batch is 1-64 characters of A-Z a-z 0-9 . _ -; otherwise config-error malformed without batch.",
                 inputs: [#"{"type":"config-pull","batch":"\#(String(repeating: "a", count: 64))"}"#,
                          #"{"type":"config-pull","batch":"A-z.0_9"}"#,
                          #"{"type":"config-pull","batch":"../x"}"#,
                          #"{"type":"config-pull","batch":""}"#,
                          #"{"type":"config-offer","batch":"\#(String(repeating: "a", count: 65))","part":1,"parts":1,"entries":[]}"#,
                          #"{"type":"config-pull","batch":7}"#],
                 expect: { a in a[2...].allSatisfy { $0.count == 1 && $0[0].hasPrefix(#"{"type":"config-error","code":"malformed""#) } }),
            Case(name: "offer-members",
                 description: "part and parts are required (config-error malformed naming the batch); origin is optional (absent: push).",
                 inputs: [#"{"type":"config-offer","batch":"b-5","part":1,"parts":1,"entries":[\#(entry)]}"#,
                          #"{"type":"config-offer","batch":"b-6","parts":1,"entries":[]}"#,
                          #"{"type":"config-offer","batch":"b-7","part":1,"entries":[]}"#,
                          #"{"type":"config-offer","batch":"b-8","part":1,"parts":1}"#],
                 expect: { a in a[0].first?.contains(#""status":"applied""#) == true
                     && a[1...].allSatisfy { $0.first?.contains(#""code":"malformed""#) == true } }),
            Case(name: "staged-pull",
                 description: "A pull staged for the device goes out before the answer to the device's request; the device's reply to it is answered with config-result.",
                 staged: [("s-1", .pull, nil)],
                 inputs: [#"{"type":"config-pull","batch":"b-9"}"#,
                          #"{"type":"config-offer","batch":"s-1","part":1,"parts":1,"origin":"reply","entries":[\#(entry)]}"#],
                 expect: { a in a[0].count == 2 && a[0][0].contains(#""batch":"s-1""#) && a[1].first?.contains("config-result") == true }),
            Case(name: "staged-push",
                 description: "A push staged for the device goes out (origin staged) before the result that completes the device's offer; its config-result is not answered.",
                 keys: secretAndLocale, staged: [("s-2", .push, ["deepgram.apiKey"])],
                 inputs: [#"{"type":"config-offer","batch":"b-10","part":1,"parts":1,"origin":"push","entries":[]}"#,
                          #"{"type":"config-result","batch":"s-2","status":"pending","applied":[],"pending":["deepgram.apiKey"],"unchanged":[],"skipped":[]}"#],
                 expect: { a in a[0].count == 2 && a[0][0].contains(#""origin":"staged""#) && a[1].isEmpty }),
            Case(name: "device-answers-reply",
                 description: "Device role: the device pulled; it answers the desktop's reply with config-result (policy ask: pending).",
                 role: .device, policy: .ask, start: [.pull(batch: "b-11", keys: nil)],
                 inputs: [#"{"type":"config-offer","batch":"b-11","part":1,"parts":1,"origin":"reply","entries":[\#(desktopEntry)]}"#],
                 expect: { $0[0].first?.contains(#""status":"pending""#) == true }),
            Case(name: "device-answers-staged-pull",
                 description: "Device role: the desktop's staged pull arrives before the reply to the device's pull; the device answers it with its own reply (share mode public).",
                 role: .device, keys: secretAndLocale, start: [.pull(batch: "b-12", keys: nil)],
                 inputs: [#"{"type":"config-pull","batch":"s-3"}"#,
                          #"{"type":"config-offer","batch":"b-12","part":1,"parts":1,"origin":"reply","entries":[]}"#],
                 expect: { a in a[0].first?.contains(#""origin":"reply""#) == true && a[1].first?.contains(#""status":"unchanged""#) == true }),
            Case(name: "reply-only-asked-keys",
                 description: "Device role: the device pulled ui.theme; the offer answering that pull (same batch) may bring only ui.theme. Any other key is left out (not stored, not held for consent) and listed as skipped; the key asked for still applies.",
                 role: .device, start: [.pull(batch: "b-13", keys: ["ui.theme"])],
                 inputs: [#"{"type":"config-offer","batch":"b-13","part":1,"parts":1,"origin":"reply","entries":[\#(desktopEntry),{"key":"deepgram.apiKey","version":"\#(version(desktop))","value":"dg_planted_00000000","secret":true}]}"#],
                 expect: { $0[0] == [#"{"type":"config-result","batch":"b-13","status":"applied","applied":["ui.theme"],"pending":[],"unchanged":[],"skipped":["deepgram.apiKey"]}"#] }),
            Case(name: "number-range",
                 description: "A number value lies within ±(2^53 - 1) = ±9007199254740991: the edges apply; 2^53, 2^53 + 1, their negatives and a number past Int64 are too-large, naming the batch.",
                 inputs: [#"{"type":"config-offer","batch":"n-1","part":1,"parts":1,"entries":[{"key":"n.max","version":"\#(version(client))","value":9007199254740991},{"key":"n.min","version":"\#(version(client))","value":-9007199254740991}]}"#,
                          #"{"type":"config-offer","batch":"n-2","part":1,"parts":1,"entries":[{"key":"n.big","version":"\#(version(client))","value":9007199254740992}]}"#,
                          #"{"type":"config-offer","batch":"n-3","part":1,"parts":1,"entries":[{"key":"n.big","version":"\#(version(client))","value":9007199254740993}]}"#,
                          #"{"type":"config-offer","batch":"n-4","part":1,"parts":1,"entries":[{"key":"n.big","version":"\#(version(client))","value":-9007199254740992}]}"#,
                          #"{"type":"config-offer","batch":"n-5","part":1,"parts":1,"entries":[{"key":"n.big","version":"\#(version(client))","value":-9007199254740993}]}"#,
                          #"{"type":"config-offer","batch":"n-6","part":1,"parts":1,"entries":[{"key":"n.big","version":"\#(version(client))","value":18446744073709551617}]}"#],
                 expect: { a in a[0].first?.contains(#""applied":["n.max","n.min"]"#) == true
                     && a[1...].enumerated().allSatisfy { i, answers in
                         answers.count == 1 && answers[0].hasPrefix(#"{"type":"config-error","batch":"n-\#(i + 2)","code":"too-large""#) } }),
            Case(name: "error-not-answered",
                 description: "A config-error is never answered (not even a malformed one).",
                 inputs: [#"{"type":"config-error","batch":"b-1","code":"internal","message":"disk full"}"#,
                          #"{"type":"config-error","code":5}"#],
                 expect: { $0.allSatisfy(\.isEmpty) }),
        ]
    }

    static func document() throws -> JSONValue {
        var out: [JSONValue] = []
        for (n, c) in cases.enumerated() { out.append(try run(c, n)) }
        return .object([
            ("description", .string("Config transfer: one side's state, its peer's frames, its answers (PROTOCOL.md, \"Config transfer\")")),
            ("now_ms", .integer(Int64(now))),
            ("desktop_id", .string(desktop.compact)),
            ("device_id", .string(client.compact)),
            ("cases", .array(out)),
        ])
    }

    static func run(_ c: Case, _ n: Int) throws -> JSONValue {
        // A directory made exclusively, 0700 (mkdtemp): a predictable name in /tmp could be another user's, made
        // first, with their files (or symlinks) inside it.
        var template = Array("/tmp/sb-vectors-\(n)-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw GeneratorError("cannot make a private directory in /tmp: \(String(cString: strerror(errno)))")
        }
        let root = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = Home(config: root + "/config", state: root + "/state", runtime: root + "/run")
        let me = c.role == .desktop ? desktop : client
        let peer = c.role == .desktop ? client : desktop
        let store = try ConfigStore(home: home, device: me, secrets: FileSecretBackend(path: home.config + "/secrets.json"),
                                    now: { now })
        var state: [JSONValue] = []
        try store.update { tx throws(ConfigError) in
            tx.document.policy.share = c.share
            tx.document.policy.defaultPolicy = c.policy
            for (key, value, secret) in c.keys {
                let r = try tx.set(key, value, secret: secret)
                var m: [(String, JSONValue)] = [("key", .string(key)), ("version", .string(r.version.description)),
                                                ("value", value.json)]
                if secret { m.append(("secret", .bool(true))) }
                state.append(.object(m))
            }
            for (id, kind, keys) in c.staged {
                tx.outbox.items.append(StagedOutbox.Item(id: id, device: peer, kind: kind, keys: keys, staged: 0))
            }
        }
        let shell = ConfigShell(store: store, peer: peer, peerName: "peer")
        var machine = ConfigMachine(role: c.role)
        let me_ = c.role == .desktop ? "desktop" : "device"
        let them = c.role == .desktop ? "device" : "desktop"
        var transcript: [JSONValue] = []
        func frame(_ from: String, _ text: String) -> JSONValue { .object([("from", .string(from)), ("plaintext", .string(text))]) }
        func text(_ m: ConfigMessage) -> String { String(decoding: MessageCodec.encode(ConfigWire.message(m)), as: UTF8.self) }
        if !c.start.isEmpty {
            let first = shell.start(&machine, c.start)
            transcript += first.messages.map { frame(me_, text($0)) }
        }
        var answers: [[String]] = []
        for input in c.inputs {
            transcript.append(frame(them, input))
            guard case let .config(type, body) = try MessageCodec.decode(Array(input.utf8)) else {
                throw GeneratorError("config.json \(c.name): \(input) is not a config message")
            }
            let out = shell.received(&machine, type: type, body: body).messages.map(text)
            answers.append(out)
            transcript += out.map { frame(me_, $0) }
        }
        try require(c.expect(answers), "config.json \(c.name): the answers are not what the case describes: \(answers)")
        var staged: [JSONValue] = []
        for (id, kind, keys) in c.staged {
            var m: [(String, JSONValue)] = [("id", .string(id)), ("kind", .string(kind.rawValue))]
            if let keys { m.append(("keys", .array(keys.map { .string($0) }))) }
            staged.append(.object(m))
        }
        return .object([
            ("name", .string(c.name)), ("description", .string(c.description)), ("role", .string(me_)),
            ("state", .object([("share", .string(c.share.rawValue)), ("policy", .string(c.policy.rawValue)),
                               ("keys", .array(state)), ("staged", .array(staged))])),
            ("transcript", .array(transcript)),
        ])
    }
}
