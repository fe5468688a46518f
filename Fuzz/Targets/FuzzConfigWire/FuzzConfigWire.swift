// libFuzzer target: the config wire decoder (`ConfigWire.decode`), which a paired device reaches with every
// `config-*` message, behind `MessageCodec.decode` exactly as in the daemon and the client.
// Built only by `make fuzz` (Fuzz/run.sh); a normal `swift build` links it with an empty main.
//
// Invariants beyond "no crash": a config message that decodes is encoded (`ConfigWire.message`) into a frame that
// decodes to an equal `ConfigMessage`, and that frame is a fixed point of decode → encode. Inputs that are not
// `config-*` frames are also fed to `ConfigWire.decode` as bodies with every type, so the decoder sees more shapes.
// Every config frame is also fed to a desktop and a device `ConfigMachine` (pure: the shell's store work is answered
// in memory): whatever it answers names no invalid batch, and a `config-error` is never answered.
import SpeakBridgeConfig
import SpeakBridgeProtocol

let types = [ConfigWire.pullType, ConfigWire.offerType, ConfigWire.resultType, ConfigWire.errorType]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfigWire(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    switch try? MessageCodec.decode(bytes) {
    case let .config(type, body)?:
        check(type: type, body: body)
        drive(type: type, body: body)
    case .some, .none:
        guard let value = try? JSONValue.parse(bytes, maxDepth: 8, maxBytes: SpeakBridgeProtocol.maxFrameSize) else { return 0 }
        for type in types { check(type: type, body: value) }
    }
    return 0
}

func check(type: String, body: JSONValue) {
    guard let decoded = try? ConfigWire.decode(type: type, body: body) else { return }
    let frame = MessageCodec.encode(ConfigWire.message(decoded))
    guard frame.count <= SpeakBridgeProtocol.maxFrameSize else { return }
    let again: ConfigMessage
    do {
        guard case let .config(type2, body2) = try MessageCodec.decode(frame) else {
            fatalError("encoded \(type) is not a config message")
        }
        again = try ConfigWire.decode(type: type2, body: body2)
    } catch {
        fatalError("encoded \(type) does not decode again: \(error)")
    }
    precondition(again == decoded, "\(type) changed in a decode → encode → decode round trip")
    precondition(MessageCodec.encode(ConfigWire.message(again)) == frame, "encoded \(type) is not a fixed point")
}

let view = ConfigView(share: .publicOnly, offerable: ["a.b", "c.apiKey"], secrets: ["c.apiKey"], recorded: ["a.b", "c.apiKey"],
                      staged: [StagedOutbox.Item(id: "s-1", device: DeviceID(publicKeyDigest: [UInt8](repeating: 1, count: 32)),
                                                 kind: .pull, keys: nil, staged: 0)])

func drive(type: String, body: JSONValue) {
    for role in [ConfigMachine.Role.desktop, .device] {
        var machine = ConfigMachine(role: role)
        var queue = machine.handle(.received(type: type, body: body, view: .success(view), now: 1_767_225_600_000))
        var steps = 0
        while !queue.isEmpty {
            steps += 1
            precondition(steps < 100, "the machine keeps asking for work")
            switch queue.removeFirst() {
            case .send(let m):
                if case let .error(batch, _, _) = m {
                    precondition(type != ConfigWire.errorType, "a config-error was answered with a config-error")
                    precondition(batch.map(MessageCodec.isValidSessionID) ?? true, "an invalid batch was echoed")
                }
            case let .resolve(batch, keys):
                queue += machine.handle(.resolved(batch: batch, keys.map { ConfigUpdate(key: $0, version: HLCTimestamp(
                    ms: 1, counter: 0, device: DeviceID(publicKeyDigest: [UInt8](repeating: 2, count: 32))), body: .deleted) }))
            case let .apply(batch, _, _, _, _):
                queue += machine.handle(.applied(batch: batch, ConfigResult(batch: batch, status: .unchanged)))
            case .unstage, .note:
                break
            }
        }
    }
}
