import SpeakBridgeSupport
/// The desktop's hot encoder for `ack`: written straight into bytes, byte for byte what `MessageCodec.encode`
/// writes for `.ack` (tested on random acks), without building a JSONValue tree (members array, an `Int64`
/// formatted through `String`, reference counting). One ack goes out per fsync and device; with many devices
/// streaming, that is one per line.
///
/// The session is escaped by the general encoder's own string routine, so a session the ledger let through
/// (always plain: `[A-Za-z0-9._-]`) and any other string come out exactly as `encode` writes them.
public enum AckEncoder {
    static let prefix = Array(#"{"type":"ack","session":"#.utf8)
    static let seqKey = Array(#","seq":"#.utf8)

    /// `MessageCodec.encode(.ack(session: session, seq: seq))`. A seq above `Int64.max` (never one the ledger
    /// acks: seqs are ≤ 2^53) is written as its unsigned digits instead of trapping.
    public static func encode(session: String, seq: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(prefix.count + seqKey.count + session.utf8.count + 24)
        out += prefix
        JSONValue.writeString(session, into: &out)
        out += seqKey
        ASCIIDecimal.append(seq, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}
