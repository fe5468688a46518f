import SpeakBridgeConfig
import SpeakBridgeProtocol
import Testing

/// The machine alone, its shell's answers made up by the test: what happens when the store or the keyring fails.
@Suite("Config machine: local failures")
struct MachineUnitTests {
    let locked = ConfigError(.local, "the keyring is locked")

    func sent(_ actions: [ConfigMachine.Action]) -> [ConfigMessage] {
        actions.compactMap { if case .send(let m) = $0 { m } else { nil } }
    }

    @Test("a store that cannot be read: internal, naming the batch; the device does not wait for that batch any more")
    func unreadableStore() {
        var machine = ConfigMachine(role: .device)
        _ = machine.handle(.start([.pull(batch: "p1", keys: nil)], ConfigView()))
        #expect(!machine.isSettled)
        let body = JSONValue.object([("batch", .string("p1")), ("part", .integer(1)), ("parts", .integer(1)), ("entries", .array([]))])
        let out = machine.handle(.received(type: ConfigWire.offerType, body: body, view: .failure(locked), now: 0))
        #expect(sent(out) == [.error(batch: "p1", code: "internal", message: "the device could not complete this (see its log)")])
        #expect(out.contains(.note(.localFailure(locked))))
        #expect(machine.isSettled)
        // An error is not answered, even then.
        let error = JSONValue.object([("batch", .string("p1")), ("code", .string("internal"))])
        #expect(sent(machine.handle(.received(type: ConfigWire.errorType, body: error, view: .failure(locked), now: 0))).isEmpty)
    }

    @Test("the device cannot read a secret for its reply to a staged pull: internal to the desktop, and it settles")
    func replyFails() {
        var machine = ConfigMachine(role: .device)
        let view = ConfigView(share: .all, offerable: ["a.apiKey"], secrets: ["a.apiKey"], recorded: ["a.apiKey"])
        let out = machine.handle(.received(type: ConfigWire.pullType, body: .object([("batch", .string("s-1"))]),
                                           view: .success(view), now: 0))
        #expect(out == [.resolve(batch: "s-1", keys: ["a.apiKey"])])
        #expect(!machine.isSettled)
        let failed = machine.handle(.failed(batch: "s-1", locked))
        #expect(sent(failed) == [.error(batch: "s-1", code: "internal", message: "the device could not complete this (see its log)")])
        #expect(machine.isSettled)
    }

    @Test("the desktop cannot read a staged push's secret: it stays staged and the device's request is still answered")
    func stagedPushFails() {
        var machine = ConfigMachine(role: .desktop)
        let item = StagedOutbox.Item(id: "s-2", device: device(2), kind: .push, keys: ["a.apiKey"], staged: 0)
        let view = ConfigView(offerable: ["a.apiKey"], secrets: ["a.apiKey"], recorded: ["a.apiKey"], staged: [item])
        let out = machine.handle(.received(type: ConfigWire.pullType, body: .object([("batch", .string("p1"))]),
                                           view: .success(view), now: 0))
        #expect(out == [.resolve(batch: "s-2", keys: ["a.apiKey"]), .resolve(batch: "p1", keys: [])])
        #expect(machine.handle(.failed(batch: "s-2", locked)) == [.note(.localFailure(locked))])
        let reply = sent(machine.handle(.resolved(batch: "p1", [])))
        #expect(reply.count == 1)
        // Not in flight: the next request sends it again at once.
        let again = machine.handle(.received(type: ConfigWire.pullType, body: .object([("batch", .string("p2"))]),
                                             view: .success(view), now: 1))
        #expect(again.first == .resolve(batch: "s-2", keys: ["a.apiKey"]))
    }
}
