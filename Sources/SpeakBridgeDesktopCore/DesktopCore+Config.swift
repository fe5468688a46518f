import SpeakBridgeProtocol

/// Config messages out to the config module, bounded per connection: each waiting one holds its whole decoded body
/// and costs a pass over the config store on the one serial queue every device shares, so a device that sends them
/// faster than they are answered has its connection's reading paused at `configAskedPause` unanswered (read again
/// when fewer wait) and closed with 1013 if `configAskedLimit` are reached anyway (frames that were already read).
extension DesktopCore {
    /// A config message of `id`'s device, to be asked of the config module (answered by `.configReplies`).
    mutating func askConfig(_ id: ConnectionID, _ device: DeviceID, type: String, body: JSONValue) -> [DesktopAction] {
        guard let asked = connections[id]?.configAsked else { return [] }
        if asked >= Self.configAskedLimit { return close(id, .failed(.configBacklog(device))) }
        connections[id]!.configAsked = asked + 1
        var out: [DesktopAction] = [.configRequest(id, device, name: clients.name(of: device) ?? "", type: type,
                                                   body: body)]
        if asked + 1 >= Self.configAskedPause, configPaused.insert(id).inserted { out.append(.pauseReading(id)) }
        return out
    }

    /// The config module answered one of `id`'s messages (or its `.configOpened`): below the pause mark, the
    /// connection is read again unless its device's backlog still holds it (`drained` resumes it then).
    mutating func configAnswered(_ id: ConnectionID) -> [DesktopAction] {
        guard let asked = connections[id]?.configAsked, asked > 0 else { return [] }
        connections[id]!.configAsked = asked - 1
        guard asked - 1 < Self.configAskedPause, configPaused.remove(id) != nil else { return [] }
        if let device = connections[id]?.device, paused[device]?.contains(id) == true { return [] }
        return [.resumeReading(id)]
    }
}
