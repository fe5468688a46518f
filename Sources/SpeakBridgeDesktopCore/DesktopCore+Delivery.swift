import SpeakBridgeProtocol

/// Chunks in, acks out: the ledger decides what is new, the pipeline (outside) writes it, durable levels come back.
/// Backpressure: a device over the high-water mark has its connections paused (resumed when it drained); at the
/// hard limit a message is refused by closing that connection with 1013 (nothing of it is accepted, so the client
/// resends it after reconnecting).
extension DesktopCore {
    mutating func deliver(device: DeviceID, session: String, chunks: [Chunk], on id: ConnectionID) -> [DesktopAction] {
        if backlog.isOverflowing(device) {
            // Frames read before the pause took effect, or from yet another connection: not accepted (no ack).
            // Closing keeps later chunks of this connection from being taken as a forward jump.
            return close(id, .failed(.overloaded(device)))
        }
        let offer = ledgers[device, default: SessionLedger()].offer(session: session, chunks: chunks)
        if let refusal = offer.refusal {
            return send([.error(code: SessionLedger.Refusal.code, message: refusal.message, expected: nil)], on: id)
        }
        var out: [DesktopAction] = offer.retired.map { retirement in
            heldSent = heldSent.filter { $0.key.device != device || $0.key.session != retirement.session }
            return .retire(device, retirement)
        }
        stats.duplicatesDropped &+= UInt64(offer.duplicates)
        if !offer.accepted.isEmpty { out.append(.submit(id, device, session: session, offer.accepted)) }
        if let ack = offer.immediateAck {
            out += send([.ack(session: session, seq: ack)], on: id)
        }
        return out
    }

    /// The pipeline's answer to a `.submit`: over the high-water mark, stop reading that connection.
    mutating func pressure(_ id: ConnectionID, _ device: DeviceID, _ pressure: BacklogMeter.Pressure) -> [DesktopAction] {
        guard pressure == .pause, connections[id] != nil else { return [] }
        guard paused[device, default: []].insert(id).inserted else { return [] }
        let backlog = backlog.undelivered(device)
        return [.log(LogLine(.info, "\(device): \(backlog.chunks) chunks (\(backlog.bytes) bytes) not yet in every sink; reading paused")),
                .pauseReading(id)]
    }

    /// Devices fell to their low-water mark: read their connections again, unless one was throttled again
    /// meanwhile (then a later drain comes).
    mutating func drained(_ devices: [DeviceID]) -> [DesktopAction] {
        var out: [DesktopAction] = []
        for device in devices where !backlog.isThrottled(device) {
            for id in (paused.removeValue(forKey: device) ?? []).sorted() where connections[id] != nil {
                out.append(.resumeReading(id))
            }
        }
        return out
    }

    /// Ack levels moved: the ledger records them, and every established connection of the device gets its acks.
    mutating func durable(_ levels: [SessionLevel]) -> [DesktopAction] {
        // One pass over the connections per batch (not per session): group the acks by device first.
        var acks: [DeviceID: [(String, UInt64)]] = [:]
        for level in levels {
            let before = ledgers[level.device]?.entry(level.session)?.delivered ?? 0
            guard ledgers[level.device]?.markDelivered(session: level.session, through: level.seq) == true else { continue }
            stats.chunksDelivered &+= level.seq - before
            acks[level.device, default: []].append((level.session, level.seq))
        }
        guard !acks.isEmpty else { return [] }
        if !heldSent.isEmpty {
            heldSent = heldSent.filter { key, notice in
                !(acks[key.device]?.contains { $0.0 == key.session && $0.1 >= notice.seq } ?? false)
            }
        }
        var out: [DesktopAction] = []
        for id in connections.keys.sorted() {
            guard let connection = connections[id], let device = connection.device, let list = acks[device],
                  connection.machine.isEstablished else { continue }
            out += send(list.map { .ack(session: $0.0, seq: $0.1) }, on: id)
        }
        return out
    }

    /// A sink holds chunks: each device with an established connection is told which (once per change).
    mutating func held(sink: String, reason: String, _ levels: [SessionLevel]) -> [DesktopAction] {
        let sink = HeldNotice.sanitizedReason(sink, maxBytes: HeldNotice.maxSinkBytes)
        let reason = HeldNotice.sanitizedReason(reason)
        var out: [DesktopAction] = []
        for level in levels where MessageCodec.isValidSessionID(level.session) && level.seq >= 1 {
            let key = HeldKey(device: level.device, session: level.session, sink: sink)
            let notice = HeldNotice(session: level.session, seq: level.seq, sink: sink, reason: reason)
            guard heldSent[key] != notice else { continue }
            let targets = connections.keys.sorted().filter {
                connections[$0]?.device == level.device && connections[$0]?.machine.isEstablished == true
            }
            guard !targets.isEmpty else { continue }
            heldSent[key] = notice
            for id in targets { out += send([.held(notice)], on: id) }
        }
        return out
    }
}
