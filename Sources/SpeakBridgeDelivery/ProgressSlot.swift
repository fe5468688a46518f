import SpeakBridgeProtocol
import SpeakBridgeSupport

/// One live (sink, device, session) of the progress log, with its record line's fixed part encoded once.
///
/// Why: a paced line (one chunk at a time) recorded its progress by building a JSONValue array and encoding the
/// device ID as Crockford base32 every time (15k instructions per line, half of it the device ID text), and then
/// found the entry again in three nested dictionaries. A slot keeps the line's text up to the seq
/// (`["sink","DEVICE-ID","session",`) and the recorded seq; the sink runner hands the slot of its last record back
/// (`ProgressLog.record(_:seq:cached:)`), so a record of the same session is a compare, a few bytes of digits and
/// the write(2).
///
/// Every field but `key` and `prefix` is guarded by the owning log's lock. `attached`: the slot is the one in the
/// log's live table for `key` (retire and forget detach it; a record through a detached slot looks the key up
/// again, as a first record does).
// `@unchecked Sendable` is sound: `key` and `prefix` are immutable; `seq` and `attached` are read and written only
// with the owning `ProgressLog`'s `lock` held (the log is the only code that touches them).
public final class ProgressSlot: @unchecked Sendable {
    let key: ProgressLog.Key
    /// `["sink","DEVICE-ID","session",` as the JSON encoder writes it.
    let prefix: [UInt8]
    var seq: UInt64 = 0
    var attached = false

    init(_ key: ProgressLog.Key) {
        self.key = key
        prefix = Self.prefix(key.sink, key.device, key.session)
    }

    /// Same key: strings compare by their storage first, so the runner's own strings match at once.
    func matches(sink: String, device: DeviceID, session: String) -> Bool {
        key.session == session && key.device == device && key.sink == sink
    }

    static func prefix(_ sink: String, _ device: DeviceID, _ session: String) -> [UInt8] {
        var out: [UInt8] = [0x5B]  // [
        for field in [sink, device.description, session] {
            out += JSONValue.string(field).encoded()
            out.append(0x2C)  // ,
        }
        return out
    }

    /// Appends `prefix`, `seq` in decimal (clamped to Int64 like the JSON integer it was) and `]\n` to `out`.
    func appendLine(_ seq: UInt64, to out: inout [UInt8]) {
        out += prefix
        ASCIIDecimal.append(UInt64(Int64(clamping: seq)), to: &out)
        out.append(0x5D)  // ]
        out.append(0x0A)
    }
}
