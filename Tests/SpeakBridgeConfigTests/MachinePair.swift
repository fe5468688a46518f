import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore

/// A desktop and a capture device, each a `ConfigMachine` carried out by `ConfigShell` on a real store (temporary
/// home, file secret backend), connected in memory: every message is encoded by `ConfigWire` and `MessageCodec`
/// and decoded from those bytes, as on a session. The only double is the session itself (no Noise, no socket).
struct MachinePair {
    let desk: TestStore
    let phone: TestStore
    var deskMachine = ConfigMachine(role: .desktop)
    var phoneMachine = ConfigMachine(role: .device)
    /// Whether the desktop still counts the phone as paired.
    var paired = true
    var acceptOnPhone = false
    var deskNotes: [ConfigNote] = []
    var phoneNotes: [ConfigNote] = []
    /// Every frame as text, `> ` from the phone, `< ` from the desktop, in the order each side sent them.
    var transcript: [String] = []
    /// Frames the desktop sent after the phone had finished (it would have said `bye` and hung up).
    var afterBye: [String] = []
    var nextBatch = 0

    init(_ label: String, clock: ManualClock = ManualClock()) throws {
        desk = try TestStore(label + "-desk", device: device(1), clock: clock)
        phone = try TestStore(label + "-phone", device: device(2), clock: clock)
    }

    func remove() {
        desk.remove()
        phone.remove()
    }

    var deskShell: ConfigShell { ConfigShell(store: desk.store, peer: phone.id, peerName: "phone") }
    var phoneShell: ConfigShell { ConfigShell(store: phone.store, peer: desk.id, peerName: "desk", acceptOverride: acceptOnPhone) }

    mutating func batch() -> String {
        nextBatch += 1
        return "b-\(nextBatch)"
    }

    static func frame(_ m: ConfigMessage) -> [UInt8] { MessageCodec.encode(ConfigWire.message(m)) }

    static func envelope(_ bytes: [UInt8]) throws -> (String, JSONValue) {
        guard case let .config(type, body) = try MessageCodec.decode(bytes) else { throw ConfigError(.malformed, "not config") }
        return (type, body)
    }

    /// One `config push/pull/sync` of the phone, run until the phone is settled (as `ConfigExchange` does).
    /// Returns whether it settled; `start` notes of a local failure end it before anything is sent.
    @discardableResult
    mutating func exchange(_ requests: [ConfigMachine.Request]) throws -> Bool {
        let first = phoneShell.start(&phoneMachine, requests)
        phoneNotes += first.notes
        if first.notes.contains(where: { if case .localFailure = $0 { true } else { false } }) { return false }
        var toDesk = first.messages.map(Self.frame)
        var toPhone: [[UInt8]] = []
        transcript += toDesk.map { "> " + String(decoding: $0, as: UTF8.self) }
        var finished = phoneMachine.isSettled
        while !toDesk.isEmpty || !toPhone.isEmpty {
            if !toDesk.isEmpty {
                let (type, body) = try Self.envelope(toDesk.removeFirst())
                let out = deskShell.received(&deskMachine, type: type, body: body, paired: paired)
                deskNotes += out.notes
                let frames = out.messages.map(Self.frame)
                let text = frames.map { "< " + String(decoding: $0, as: UTF8.self) }
                if finished {
                    afterBye += text
                } else {
                    transcript += text
                    toPhone += frames
                }
            } else {
                let (type, body) = try Self.envelope(toPhone.removeFirst())
                let out = phoneShell.received(&phoneMachine, type: type, body: body)
                phoneNotes += out.notes
                let frames = out.messages.map(Self.frame)
                transcript += frames.map { "> " + String(decoding: $0, as: UTF8.self) }
                toDesk += frames
                finished = phoneMachine.isSettled
                if finished {
                    afterBye += toPhone.map { "< " + String(decoding: $0, as: UTF8.self) }
                    toPhone.removeAll()
                }
            }
        }
        return finished
    }

    /// What the desktop answers to one frame the phone (or a hostile peer) sends, as text.
    mutating func deskAnswers(_ text: String) throws -> [String] {
        let (type, body) = try Self.envelope(Array(text.utf8))
        let out = deskShell.received(&deskMachine, type: type, body: body, paired: paired)
        deskNotes += out.notes
        return out.messages.map { String(decoding: Self.frame($0), as: UTF8.self) }
    }

    func stage(_ kind: StagedOutbox.Item.Kind, _ id: String, keys: [String]? = nil) throws {
        try desk.store.update { tx throws(ConfigError) in
            tx.outbox.items.append(StagedOutbox.Item(id: id, device: phone.id, kind: kind, keys: keys, staged: 0))
        }
    }

    func share(_ mode: ShareMode, on store: TestStore) throws {
        try store.store.update { tx throws(ConfigError) in tx.document.policy.share = mode }
    }

    var stagedOnDesk: [String] { ((try? desk.store.read().outbox.items) ?? []).map(\.id) }
}

extension MachinePair {
    /// What the phone answers to one frame the desktop (or a hostile desktop) sends, as text.
    mutating func phoneAnswers(_ text: String) throws -> [String] {
        let (type, body) = try Self.envelope(Array(text.utf8))
        let out = phoneShell.received(&phoneMachine, type: type, body: body)
        phoneNotes += out.notes
        return out.messages.map { String(decoding: Self.frame($0), as: UTF8.self) }
    }

    /// The phone's `config pull`/`push`/`sync` requests sent (not answered yet), as text.
    mutating func phoneStarts(_ requests: [ConfigMachine.Request]) -> [String] {
        let out = phoneShell.start(&phoneMachine, requests)
        phoneNotes += out.notes
        return out.messages.map { String(decoding: Self.frame($0), as: UTF8.self) }
    }
}
