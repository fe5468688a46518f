import SpeakBridgeProtocol

/// Chunks in, acks out: the ledger decides what is new, the pipeline (outside) writes it, durable levels come back.
/// Backpressure: a device over the high-water mark has its connections paused (resumed when it drained); at the
/// hard limit a message is refused by closing that connection with 1013 (nothing of it is accepted, so the client
/// resends it after reconnecting). A chunk for a new session beyond the device's bound is answered with
/// `too-many-sessions` and its connection closed too (1013), for the same reason.
extension DesktopCore {
    /// Appends to `out` (the caller's actions: no array of its own per chunk message, no copy into the caller's).
    mutating func deliver(device: DeviceID, session: String, chunks: [Chunk], on id: ConnectionID,
                          into out: inout [DesktopAction]) {
        if backlog.isOverflowing(device) {
            // Frames read before the pause took effect, or from yet another connection: not accepted (no ack).
            // Closing keeps later chunks of this connection from being taken as a forward jump.
            out += close(id, .failed(.overloaded(device)))
            return
        }
        let index: Dictionary<DeviceID, SessionLedger>.Index
        if let last = lastLedger, last.device == device {
            index = last.index
        } else if let found = ledgers.index(forKey: device) {  // one hash, as before (many devices taking turns)
            index = found
            lastLedger = (device, found)
        } else {
            ledgers[device] = SessionLedger()  // moves the indices of the others
            guard let added = ledgers.index(forKey: device) else { preconditionFailure("the ledger just added") }
            index = added
            lastLedger = (device, added)
        }
        let offer = ledgers.values[index].offer(session: session, chunks: chunks)
        if let refusal = offer.refusal {
            // Answered, then closed (1013): a later chunk of this session accepted on the same connection would be
            // a forward jump, and its ack would cover the refused chunks. The client resends after reconnecting.
            out += send([.error(code: SessionLedger.Refusal.code, message: refusal.message, expected: nil)], on: id)
            out += close(id, .failed(.chunkRefused(device, SessionLedger.Refusal.code)))
            return
        }
        for retirement in offer.retired {
            heldSent = heldSent.filter { $0.key.device != device || $0.key.session != retirement.session }
            out.append(.retire(device, retirement))
        }
        stats.duplicatesDropped &+= UInt64(offer.duplicates)
        if !offer.accepted.isEmpty { out.append(.submit(id, device, session: session, offer.accepted)) }
        if let ack = offer.immediateAck {
            out += send([.ack(session: session, seq: ack)], on: id)
        }
    }

    /// The pipeline's answer to a `.submit`: over the high-water mark, stop reading that connection.
    mutating func pressure(_ id: ConnectionID, _ device: DeviceID, _ pressure: BacklogMeter.Pressure) -> [DesktopAction] {
        guard pressure == .pause, connections[id] != nil else { return [] }
        guard paused[device, default: []].insert(id).inserted else { return [] }
        // Logged at most once per `pauseLogInterval` per device, with how many pauses went unlogged before it.
        if let last = pauseLog[device], now - last.at < Self.pauseLogInterval {
            pauseLog[device]?.unlogged += 1
            return [.pauseReading(id)]
        }
        let unlogged = pauseLog[device]?.unlogged ?? 0
        pauseLog[device] = PauseLog(at: now, unlogged: 0)
        let backlog = backlog.undelivered(device)
        let since = unlogged > 0 ? " (\(unlogged) more \(unlogged == 1 ? "pause" : "pauses") since the last report)" : ""
        return [.log(LogLine(.info, "\(device): \(backlog.chunks) chunks (\(backlog.bytes) bytes) not yet in every sink; reading paused" + since)),
                .pauseReading(id)]
    }

    /// Devices fell to their low-water mark: read their connections again, unless one was throttled again
    /// meanwhile (then a later drain comes).
    mutating func drained(_ devices: [DeviceID]) -> [DesktopAction] {
        var out: [DesktopAction] = []
        for device in devices where !backlog.isThrottled(device) {
            for id in (paused.removeValue(forKey: device) ?? []).sorted()
            where connections[id] != nil && !configPaused.contains(id) {
                out.append(.resumeReading(id))
            }
        }
        return out
    }

    /// Ack levels moved: the ledger records them, and every established connection of the device gets its acks.
    /// Each ack is encoded and encrypted in place in its connection's machine (`acknowledgeFrame`: no `Message`,
    /// no copy of the connection), and only the device's own connections are visited (`authenticated`), not every
    /// connection: with 100 devices streaming, every line gets its own ack.
    mutating func durable(_ levels: [SessionLevel]) -> [DesktopAction] {
        if levels.count == 1 { return durable(levels[0]) }  // the usual batch: one session moved
        // Many devices streaming: one fsync covers a level per device. No table per device: the levels that
        // moved, then (connection, level) pairs in connection order, each connection's acks in level order.
        var moved: [SessionLevel] = []
        moved.reserveCapacity(levels.count)
        for level in levels where advanceDelivered(level) { moved.append(level) }
        guard !moved.isEmpty else { return [] }
        if !heldSent.isEmpty {
            heldSent = heldSent.filter { key, notice in
                !moved.contains { $0.device == key.device && $0.session == key.session && $0.seq >= notice.seq }
            }
        }
        var targets: [(id: ConnectionID, level: Int)] = []
        for (index, level) in moved.enumerated() {
            for id in authenticated[level.device] ?? [] { targets.append((id, index)) }
        }
        targets.sort { $0.id != $1.id ? $0.id < $1.id : $0.level < $1.level }
        var out: [DesktopAction] = []
        out.reserveCapacity(targets.count)
        for target in targets {
            acknowledge(moved[target.level].session, moved[target.level].seq, on: target.id, into: &out)
        }
        return out
    }

    /// One session's ack level moved (one fsync covered one session: the usual case, and every line's when many
    /// devices stream at once): no grouping table, no arrays but the actions.
    mutating func durable(_ level: SessionLevel) -> [DesktopAction] {
        guard advanceDelivered(level) else { return [] }
        if !heldSent.isEmpty {
            heldSent = heldSent.filter { key, notice in
                !(key.device == level.device && key.session == level.session && level.seq >= notice.seq)
            }
        }
        guard let ids = authenticated[level.device] else { return [] }
        var out: [DesktopAction] = []
        out.reserveCapacity(ids.count)
        for id in ids { acknowledge(level.session, level.seq, on: id, into: &out) }
        return out
    }

    /// Moves the ledger's ack level (one device lookup, in place) and counts what it newly covers; false when it
    /// did not move (unknown device or session, or not above the current level).
    mutating func advanceDelivered(_ level: SessionLevel) -> Bool {
        guard let index = ledgers.index(forKey: level.device),
              let before = ledgers.values[index].advanceDelivered(session: level.session, through: level.seq) else {
            return false
        }
        stats.chunksDelivered &+= level.seq - before
        return true
    }

    /// The ack on connection `id`, encrypted in place in its machine (nothing when it is gone or not established).
    mutating func acknowledge(_ session: String, _ seq: UInt64, on id: ConnectionID, into out: inout [DesktopAction]) {
        guard let index = connections.index(forKey: id),
              let action = connections.values[index].machine.acknowledgeFrame(session: session, through: seq) else {
            return
        }
        if case .send(let frame) = action {
            out.append(.send(id, frame))
        } else {
            out += perform([action], on: id)  // encryption failed: the machine closed
        }
    }

    /// The holds standing for a device's session, told on connection `id` right after its `resume` answer: a client
    /// that reconnected during a hold (its Wi-Fi dropped, or anything else) learns why no ack is coming, as the
    /// connection that was open when the hold began did (`held` otherwise goes out once per change).
    mutating func heldNotices(device: DeviceID, session: String, on id: ConnectionID) -> [DesktopAction] {
        guard !heldSent.isEmpty else { return [] }
        let standing = heldSent.filter { $0.key.device == device && $0.key.session == session }
            .sorted { $0.key.sink < $1.key.sink }
        return standing.flatMap { send([.held($0.value)], on: id) }
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
