#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Config transfer against the real binary: a desktop daemon and a phone installation, two homes, loopback only.
@Suite("End to end: config transfer", .serialized)
struct ConfigTransferTests {
    static let secret = "dg_4f1c2a9e77b04d1fa3c6e5b8d2079f3a"

    func config(_ args: [String], _ home: String, timeout: Double = 30) throws -> Outcome {
        try run(["config"] + args, home: home, timeout: timeout)
    }

    @discardableResult
    func ok(_ args: [String], _ home: String) throws -> Outcome {
        let out = try config(args, home)
        #expect(out.status == 0, "config \(args.joined(separator: " ")) failed: \(out.stderr)")
        return out
    }

    func value(_ key: String, _ home: String) throws -> String? {
        let out = try config(["get", key], home)
        return out.status == 0 ? out.stdout.trimmingCharacters(in: .newlines) : nil
    }

    func startPaired() throws -> Pair {
        let pair = Pair()
        try pair.startDaemon(sinks: ["stdout"])
        try pair.join()
        return pair
    }

    @Test("push a secret from desktop to phone with policy ask: pending, masked diff, accept, 0600, never in logs")
    func pushSecretWithConsent() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        var outputs: [String] = []
        func keep(_ o: Outcome) -> Outcome { outputs += [o.stdout, o.stderr]; return o }

        _ = keep(try ok(["set", "deepgram.apiKey", Self.secret, "--secret"], pair.desktopHome))
        _ = keep(try ok(["set", "transcription.locale", "de-CH"], pair.desktopHome))
        let staged = keep(try ok(["push", "--to", "phone", "deepgram.apiKey", "transcription.locale"], pair.desktopHome))
        #expect(staged.stderr.contains("staged"))

        let pull = keep(try ok(["pull"], pair.phoneHome))
        #expect(pull.stderr.contains("waiting for your consent"))
        #expect(try value("deepgram.apiKey", pair.phoneHome) == nil, "nothing applied before consent")

        let pending = keep(try ok(["pending"], pair.phoneHome))
        #expect(pending.stdout.contains("deepgram.apiKey"))
        #expect(pending.stdout.contains("dg_…9f3a"), "masked like dg_…9f3a: \(pending.stdout)")
        #expect(pending.stdout.contains("+ \"de-CH\""))
        #expect(pending.stdout.contains("- (not set)"))

        _ = keep(try ok(["accept"], pair.phoneHome))
        #expect(try value("deepgram.apiKey", pair.phoneHome) == "dg_…9f3a")
        #expect(try value("transcription.locale", pair.phoneHome) == "de-CH")
        let list = keep(try ok(["list"], pair.phoneHome))
        #expect(list.stdout.contains("deepgram.apiKey = dg_…9f3a  (secret)"))
        #expect(list.stdout.contains("secrets: file (0600)"))
        let revealed = try ok(["get", "deepgram.apiKey", "--reveal"], pair.phoneHome)
        #expect(revealed.stdout == Self.secret + "\n")

        // Stored 0600, and only in the secret file.
        for file in ["config/secrets.json", "config/settings.json"] {
            #expect(FileIO.mode(pair.phoneHome + "/" + file) == 0o600, "\(file) must be 0600")
        }
        let settings = try String(contentsOfFile: pair.phoneHome + "/config/settings.json", encoding: .utf8)
        #expect(!settings.contains(Self.secret))
        #expect(try String(contentsOfFile: pair.phoneHome + "/config/secrets.json", encoding: .utf8).contains(Self.secret))

        // Delivered once: the staged push is gone, a second pull changes nothing.
        let again = keep(try ok(["pull"], pair.phoneHome))
        #expect(again.stderr.contains("applied 0") && !again.stderr.contains("pushed by"))
        #expect(try ok(["list", "--json"], pair.desktopHome).stdout.contains(#""staged":0"#))

        // Never in any output but --reveal, nor in the daemon's log.
        outputs += [pair.daemon!.stdout, pair.daemon!.stderr]
        for text in outputs { #expect(!text.contains(Self.secret)) }
        #expect(!pair.daemon!.stderr.contains("4f1c2a9e"))
    }

    @Test("concurrent edits on both sides: after sync both hold the same winner")
    func concurrentEditsConverge() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        for home in [pair.desktopHome, pair.phoneHome] { try ok(["policy", "accept"], home) }
        try ok(["set", "transcription.model", "nova-2"], pair.desktopHome)
        try ok(["set", "llm.temperature", "0.2"], pair.phoneHome)
        usleep(5_000)
        try ok(["set", "transcription.model", "whisper-large"], pair.phoneHome)  // later: wins
        try ok(["set", "llm.temperature", "0.7"], pair.desktopHome)  // later: wins
        try ok(["set", "ui.theme", "dark"], pair.desktopHome)
        try ok(["set", "phone.vibrate", "true"], pair.phoneHome)

        let sync = try ok(["sync"], pair.phoneHome)
        #expect(sync.stderr.contains("sent to"))
        for home in [pair.desktopHome, pair.phoneHome] {
            #expect(try value("transcription.model", home) == "whisper-large")
            #expect(try value("llm.temperature", home) == "0.7")
            #expect(try value("ui.theme", home) == "dark")
            #expect(try value("phone.vibrate", home) == "true")
        }
        // Idempotent: a second sync changes nothing, and both stores list the same versions.
        try ok(["sync"], pair.phoneHome)
        let desk = try ok(["list", "--json", "--all"], pair.desktopHome).stdout
        let phone = try ok(["list", "--json", "--all"], pair.phoneHome).stdout
        #expect(entries(desk) == entries(phone))

        // A pull staged on the desktop is answered by the phone on its next exchange.
        try ok(["set", "phone.microphone", "usb"], pair.phoneHome)
        try ok(["pull", "--from", "phone"], pair.desktopHome)
        try ok(["pull", "transcription.model"], pair.phoneHome)
        #expect(try value("phone.microphone", pair.desktopHome) == "usb")
    }

    /// The entries array of `config list --json`, for comparing two stores.
    func entries(_ json: String) -> JSONValue? {
        (try? JSONValue.parse(Array(json.trimmingCharacters(in: .newlines).utf8), maxDepth: 8, maxBytes: 1 << 24))?["entries"]
    }

    @Test("a tombstone wins over an older value and syncs")
    func tombstoneWins() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        for home in [pair.desktopHome, pair.phoneHome] { try ok(["policy", "accept"], home) }
        try ok(["share", "all"], pair.desktopHome)  // the secret below is pulled by the phone's sync
        try ok(["set", "rev.apiKey", "rev_0123456789abcdef0123"], pair.desktopHome)
        try ok(["set", "openrouter.model", "gpt-x"], pair.desktopHome)
        try ok(["sync"], pair.phoneHome)
        #expect(try value("openrouter.model", pair.phoneHome) == "gpt-x")

        try ok(["unset", "openrouter.model"], pair.phoneHome)
        try ok(["unset", "rev.apiKey"], pair.phoneHome)
        try ok(["sync"], pair.phoneHome)
        for home in [pair.desktopHome, pair.phoneHome] {
            #expect(try value("openrouter.model", home) == nil)
            #expect(try value("rev.apiKey", home) == nil)
            #expect(try ok(["list", "--json", "--all"], home).stdout.contains(#""key":"openrouter.model","deleted":true"#))
        }
        // The desktop's older value does not come back; a newer write does.
        try ok(["sync"], pair.phoneHome)
        #expect(try value("openrouter.model", pair.phoneHome) == nil)
        try ok(["set", "openrouter.model", "gpt-y"], pair.desktopHome)
        try ok(["sync"], pair.phoneHome)
        #expect(try value("openrouter.model", pair.phoneHome) == "gpt-y")
    }

    @Test("trust keys and hostile input from a peer are refused with an error to both sides; nothing changes")
    func hostilePeer() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        try ok(["policy", "accept"], pair.desktopHome)
        try ok(["set", "transcription.locale", "en-GB"], pair.desktopHome)
        // peers.json without lastSeen (the daemon stamps it on every session).
        func peers() throws -> String {
            try String(contentsOfFile: pair.desktopHome + "/state/peers.json", encoding: .utf8)
                .replacingOccurrences(of: #","lastSeen":\d+"#, with: "", options: .regularExpression)
        }
        let peersBefore = try peers()
        let listBefore = try ok(["list", "--json", "--all"], pair.desktopHome).stdout

        let link = try ConfigLink(pair)
        defer { link.close() }
        let v = link.version()
        let cases: [(String, [(String, JSONValue)], String)] = [
            ("config-offer", offer("t1", [entry("devices.list", v, "evil"), entry("ui.theme", v, "dark")]), "forbidden"),
            ("config-offer", offer("t2", [entry("identity.key", v, "00")]), "forbidden"),
            ("config-offer", offer("t3", [entry("policy.default", v, "accept")]), "forbidden"),
            ("config-offer", offer("t4", [entry("speakbridge.policy", v, "accept")]), "forbidden"),
            ("config-offer", offer("t5", [entry("Pairings.x", v, "1")]), "forbidden"),
            ("config-bogus", [("batch", .string("t6"))], "unknown-type"),
            ("config-offer", offer("t7", [entry("ui.theme", v, String(repeating: "x", count: 5_000))]), "too-large"),
            ("config-offer", offer("t8", [entry("../etc/passwd", v, "x")]), "malformed"),
            ("config-offer", offer("t9", [entry("ui.theme", link.version(aheadSeconds: 3_600), "dark")]), "clock"),
            ("config-offer", offer("t10", [.object([("key", .string("ui.theme")), ("version", .string(v)),
                                                    ("value", .array([]))])]), "malformed"),
            ("config-offer", offer("t11", [entry("ui.theme", v, "a\u{1B}]52;c;x\u{07}")]), "malformed"),
        ]
        for (type, body, code) in cases {
            link.send(type: type, body)
            let reply = try link.receive()
            guard case .config("config-error", let body) = reply else {
                Issue.record("\(type) \(code): expected config-error, got \(reply)")
                continue
            }
            #expect(body["code"]?.stringValue == code, "\(body)")
        }
        // The session survived all of it, and a good batch still applies.
        link.send(type: "config-offer", offer("t12", [entry("ui.font", v, "mono")]))
        guard case .config("config-result", let result) = try link.receive() else { Issue.record("no result"); return }
        #expect(result["status"]?.stringValue == "applied")

        #expect(try value("ui.theme", pair.desktopHome) == nil)
        #expect(try value("ui.font", pair.desktopHome) == "mono")
        try ok(["unset", "ui.font"], pair.desktopHome)
        #expect(try peers() == peersBefore)
        #expect(try ok(["policy"], pair.desktopHome).stdout == "default: accept\n")
        let listAfter = try ok(["list", "--json", "--all"], pair.desktopHome).stdout
        #expect(entries(listAfter)?.arrayValue?.count == (entries(listBefore)?.arrayValue?.count ?? 0) + 1)  // + ui.font tombstone
        usleep(200_000)
        #expect(pair.daemon!.stderr.contains("forbidden"))
        #expect(pair.daemon!.stderr.contains("clock"))

        // Trust keys cannot be set locally either, so no CLI could ever offer one.
        for key in ["devices.list", "speakbridge.policy", "identity.key"] {
            let out = try config(["set", key, "x"], pair.phoneHome)
            #expect(out.status != 0 && out.stderr.contains("reserved"))
        }
    }

    /// Found by review: `--accept` applied every key the exchange brought, so a desktop answering a pull of one key
    /// could plant any other (an API key) in the same exchange.
    @Test("`config pull KEY --accept` applies only KEY; a push of another key staged on the desktop waits for consent")
    func pullNamedKeysAcceptsOnlyThem() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        try ok(["set", "deepgram.apiKey", Self.secret, "--secret"], pair.desktopHome)
        try ok(["set", "ui.theme", "dark"], pair.desktopHome)
        try ok(["push", "--to", "phone", "deepgram.apiKey"], pair.desktopHome)

        let pull = try ok(["pull", "ui.theme", "--accept"], pair.phoneHome)
        #expect(pull.stderr.contains("applied 1 (ui.theme)"), "\(pull.stderr)")
        #expect(pull.stderr.contains("1 waiting for your consent"), "\(pull.stderr)")
        #expect(try value("ui.theme", pair.phoneHome) == "dark")
        #expect(try value("deepgram.apiKey", pair.phoneHome) == nil, "--accept covers only the key the pull named")
        #expect(try ok(["pending"], pair.phoneHome).stdout.contains("deepgram.apiKey"))
        try ok(["accept", "deepgram.apiKey"], pair.phoneHome)
        #expect(try value("deepgram.apiKey", pair.phoneHome) == "dg_…9f3a")
    }

    /// Found by review: integers up to ±2^63 were stored and sent, beyond what a JSON reader holding doubles keeps.
    @Test("numbers beyond ±(2^53 - 1): refused by config set, in a peer's offer and in settings.json; the edges work")
    func numberRange() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        try ok(["policy", "accept"], pair.desktopHome)
        // `VALUE` `-` reads it from stdin (a negative number as an argument would need `--`).
        func set(_ key: String, _ text: String, _ flags: [String] = []) throws -> Outcome {
            let input = Pipe()
            input.fileHandleForWriting.write(Data((text + "\n").utf8))
            try input.fileHandleForWriting.close()
            return try run(["config", "set", key, "-"] + flags, home: pair.phoneHome, stdin: input.fileHandleForReading)
        }
        for text in ["9007199254740992", "9007199254740993", "-9007199254740992", "-9007199254740993", "9223372036854775808"] {
            let out = try set("n.value", text)
            #expect(out.status == 1 && out.stderr.contains("2^53") && out.stderr.contains("--string"), "\(text): \(out.stderr)")
        }
        #expect(try set("n.text", "9007199254740993", ["--string"]).status == 0)
        #expect(try value("n.text", pair.phoneHome) == "9007199254740993")
        #expect(try set("n.max", "9007199254740991").status == 0)
        #expect(try set("n.min", "-9007199254740991").status == 0)
        #expect(try value("n.min", pair.phoneHome) == "-9007199254740991")
        try ok(["push", "n.max", "n.min", "n.text"], pair.phoneHome)
        #expect(try value("n.max", pair.desktopHome) == "9007199254740991")
        #expect(try value("n.min", pair.desktopHome) == "-9007199254740991")
        #expect(try value("n.text", pair.desktopHome) == "9007199254740993")

        // A peer that sends one anyway: too-large, nothing of its batch applied.
        let link = try ConfigLink(pair)
        defer { link.close() }
        let v = link.version()
        for (i, number) in ["9007199254740992", "-9007199254740993", "18446744073709551617"].enumerated() {
            let entries: [JSONValue] = [entry("ui.theme", v, "dark"),
                                        try JSONValue.parse(Array(#"{"key":"n.big","version":"\#(v)","value":\#(number)}"#.utf8))]
            link.send(type: "config-offer", offer("n\(i)", entries))
            guard case .config("config-error", let body) = try link.receive() else { Issue.record("\(number): no config-error"); continue }
            #expect(body["code"]?.stringValue == "too-large" && body["batch"]?.stringValue == "n\(i)", "\(number): \(body)")
        }
        #expect(try value("ui.theme", pair.desktopHome) == nil)
        #expect(try value("n.big", pair.desktopHome) == nil)

        // A settings.json holding one (an older version could write it): every command says which key and what to do.
        let settings = pair.phoneHome + "/config/settings.json"
        let text = try String(contentsOfFile: settings, encoding: .utf8)
        try FileIO.atomicWrite(settings, Array(text.replacingOccurrences(of: "9007199254740991", with: "9007199254740993").utf8))
        let list = try config(["list"], pair.phoneHome)
        #expect(list.status != 0 && list.stderr.contains("settings.json") && list.stderr.contains("n.max"), "\(list.stderr)")
    }

    @Test("a revoked device can neither push nor pull")
    func revokedDevice() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        try ok(["policy", "accept"], pair.desktopHome)
        try ok(["set", "ui.theme", "dark"], pair.phoneHome)
        try ok(["set", "transcription.locale", "fr-FR"], pair.desktopHome)
        try ok(["push", "--to", "phone"], pair.desktopHome)
        let revoke = try run(["devices", "revoke", "phone"], home: pair.desktopHome)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        // Nothing staged for it survives the revoke (it would reach the device if it were ever paired again).
        #expect(try ok(["list", "--json"], pair.desktopHome).stdout.contains(#""staged":0"#))

        let push = try config(["push"], pair.phoneHome)
        #expect(push.status != 0)
        #expect(push.stderr.contains("not (or no longer) paired"), "\(push.stderr)")
        let pull = try config(["pull", "--accept"], pair.phoneHome)
        #expect(pull.status != 0)
        #expect(try value("ui.theme", pair.desktopHome) == nil)
        #expect(try value("transcription.locale", pair.phoneHome) == nil)
        #expect(try ok(["pending"], pair.phoneHome).stderr.contains("nothing pending"))
    }

    @Test("a device revoked while no daemon runs: what was staged for it is dropped too")
    func revokeWithoutDaemon() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        pair.daemon?.terminate()
        try ok(["set", "ui.theme", "dark"], pair.desktopHome)
        try ok(["push", "--to", "phone"], pair.desktopHome)
        try ok(["pull", "--from", "phone"], pair.desktopHome)
        #expect(try ok(["list", "--json"], pair.desktopHome).stdout.contains(#""staged":2"#))
        let revoke = try run(["devices", "revoke", "phone"], home: pair.desktopHome)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        #expect(revoke.stderr.contains("dropped 2 config push/pull item(s)"), "\(revoke.stderr)")
        #expect(try ok(["list", "--json"], pair.desktopHome).stdout.contains(#""staged":0"#))
    }

    @Test("an interrupted transfer applies nothing; a kill -9 of the desktop mid-push leaves all or none")
    func interruptedTransfer() throws {
        let pair = try startPaired()
        defer { pair.stop() }
        try ok(["policy", "accept"], pair.desktopHome)

        // Part 1 of 2, then the connection drops: nothing of the batch is applied.
        do {
            let link = try ConfigLink(pair)
            let v = link.version()
            link.send(type: "config-offer", offer("cut", [entry("cut.a", v, "1"), entry("cut.b", v, "2")], part: 1, parts: 2))
            usleep(300_000)
            link.close()
        }
        usleep(300_000)
        #expect(try value("cut.a", pair.desktopHome) == nil)
        #expect(try value("cut.b", pair.desktopHome) == nil)
        // Both parts on one connection: applied whole.
        do {
            let link = try ConfigLink(pair)
            defer { link.close() }
            let v = link.version()
            link.send(type: "config-offer", offer("whole", [entry("cut.a", v, "1")], part: 1, parts: 2))
            link.send(type: "config-offer", offer("whole", [entry("cut.b", v, "2")], part: 2, parts: 2))
            guard case .config("config-result", let r) = try link.receive() else { Issue.record("no result"); return }
            #expect(r["applied"]?.arrayValue?.count == 2)
        }

        // A big multi-part push from the real CLI, and the desktop killed at different moments.
        try writeManyKeys(pair.phoneHome, count: 900)
        let phoneSettings = try String(contentsOfFile: pair.phoneHome + "/config/settings.json", encoding: .utf8)
        for delay in [150_000, 300_000, 450_000, 650_000, 1_000_000] as [UInt32] {
            let push = try Proc(["config", "push", "--timeout", "10"], home: pair.phoneHome, label: "push\(delay)")
            usleep(delay)
            pair.daemon!.kill9()
            let out = try push.wait()
            try pair.startDaemon(sinks: ["stdout"])
            let count = try bulkKeys(pair.desktopHome)
            print("kill after \(delay) µs: push exit \(out.status), desktop holds \(count) of 900")
            #expect(count == 0 || count == 900, "kill after \(delay) µs left \(count) of 900 keys")
            if out.status == 0 { #expect(count == 900) }
            // Reset the desktop for the next round.
            try FileManager.default.removeItem(atPath: pair.desktopHome + "/config/settings.json")
            try? FileManager.default.removeItem(atPath: pair.desktopHome + "/config/secrets.json")
            try ok(["policy", "accept"], pair.desktopHome)
        }
        #expect(try String(contentsOfFile: pair.phoneHome + "/config/settings.json", encoding: .utf8) == phoneSettings)
        // After all that, a push completes.
        let final = try config(["push", "--timeout", "20"], pair.phoneHome)
        #expect(final.status == 0, "\(final.stderr)")
        #expect(try bulkKeys(pair.desktopHome) == 900)
    }

    /// Keys `bulk.k0…` in the desktop's store.
    func bulkKeys(_ home: String) throws -> Int {
        let list = try ok(["list", "--json"], home).stdout
        return entries(list)?.arrayValue?.filter { $0["key"]?.stringValue?.hasPrefix("bulk.") == true }.count ?? -1
    }

    /// Writes `count` keys of 500 bytes into the phone's settings.json (the documented format): ~10 offer parts.
    func writeManyKeys(_ home: String, count: Int) throws {
        let id = try Identity.loadOrCreate(Home.resolve(override: home)).deviceID.compact
        let ms = Int64(Date().timeIntervalSince1970 * 1_000)
        let filler = String(repeating: "v", count: 500)
        let entries: [JSONValue] = (0..<count).map { i in
            .object([("key", .string("bulk.k\(i)")), ("version", .string("\(ms):0:\(id)")), ("value", .string(filler))])
        }
        let doc = JSONValue.object([("version", .integer(1)), ("clock", .object([("ms", .integer(ms)), ("counter", .integer(0))])),
                                    ("entries", .array(entries))])
        try FileIO.atomicWrite(home + "/config/settings.json", doc.encoded())
    }

    func entry(_ key: String, _ version: String, _ value: String) -> JSONValue {
        .object([("key", .string(key)), ("version", .string(version)), ("value", .string(value))])
    }

    func offer(_ batch: String, _ entries: [JSONValue], part: Int = 1, parts: Int = 1) -> [(String, JSONValue)] {
        [("batch", .string(batch)), ("part", .integer(Int64(part))), ("parts", .integer(Int64(parts))),
         ("entries", .array(entries))]
    }
}

/// A session opened with the phone's own key and psk, driven by the test: a peer that sends whatever it likes.
final class ConfigLink {
    let link: RawLink
    var machine: InitiatorMachine
    let device: DeviceID

    init(_ pair: Pair) throws {
        let home = Home.resolve(override: pair.phoneHome)
        let identity = try Identity.loadOrCreate(home)
        let desktop = try #require(try PeerStore(home: home).all.first)
        device = identity.deviceID
        link = try RawLink(port: pair.port, path: ConnectionIntent.session.path)
        machine = try InitiatorMachine(intent: .session, localStatic: identity.privateKey, desktopKey: desktop.publicKey,
                                       psk: desktop.psk.copyBytes(), firstMessage: .hello(agent: "config-test"))
        link.send(try machine.start())
        let established = machine.receive(try link.next()).contains { if case .established = $0 { true } else { false } }
        guard established else { throw HarnessError("session not established") }
    }

    func version(aheadSeconds: Int64 = 0) -> String {
        "\(Int64(Date().timeIntervalSince1970 * 1_000) + aheadSeconds * 1_000):0:\(device.compact)"
    }

    func send(type: String, _ body: [(String, JSONValue)]) {
        for action in machine.encryptAndSend(.config(type: type, body: .object(body))) {
            if case .send(let frame) = action { link.send(frame) }
        }
    }

    func receive() throws -> Message {
        for action in machine.receive(try link.next()) {
            if case .received(let m) = action { return m }
        }
        throw HarnessError("no message")
    }

    func close() { link.close() }
}
