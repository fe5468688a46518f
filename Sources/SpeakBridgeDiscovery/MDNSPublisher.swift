// Publishing the daemon's `_speakbridge._tcp` service through avahi-daemon.
//
// Flow (poll thread):
//   1. clientRunning: make the entry group, add the service with its TXT list, commit
//      -> .registering. A local collision (another client of the same daemon owns the name)
//      comes back at once as -8 from add_service: rename and add again.
//   2. Group ESTABLISHED -> .established(name). Group COLLISION (another host probed the name
//      first): rename with avahi_alternative_service_name ("Desk" -> "Desk #2"), reset, and add again
//      after a random wait (`collisionWait`). Why random: two desktops started together with one name
//      can both be told COLLISION (seen in the LAN test, where each desktop's records differ), and
//      both then pick the same alternative. Re-probing at once kept them in step,
//      colliding name after name (seen: "office #14" after 20 s in the LAN test). So the wait is random,
//      and grows with each collision in a row (up to 1.5, 3, then 6 s); from the second collision in a
//      row on, a coin also decides whether to skip one alternative ("#3" instead of "#2").
//   3. Group FAILURE -> .failed(reason), and a new attempt after the retry interval.
//   4. The daemon goes away -> .noDaemon(reason); the connection reconnects and step 1 runs again
//      with the requested name (the other host may be gone by then).
internal import CAvahi
import SpeakBridgeSupport

/// Publishes one SpeakBridge service (`_speakbridge._tcp`) on every interface avahi-daemon uses,
/// and keeps it published across daemon restarts and name collisions.
///
/// State changes arrive through `onStateChange` on a private serial queue, in order, never on
/// avahi's thread; the handler may call `stop()`. Without avahi-daemon the publisher reports
/// `.noDaemon` once and keeps retrying every few seconds; print one warning and carry on.
/// Without libavahi-client (loaded on first use, see LibAvahi) it reports `.failed` once, naming the
/// package to install, and does nothing more.
public final class MDNSPublisher: Sendable {
    /// nil when libavahi-client cannot be loaded; then `missing` is the state.
    private let core: PublisherCore?
    private let missing: PublisherState?

    /// - Parameters:
    ///   - name: the service instance name shown to users, e.g. "Desk" (at most 63 bytes of UTF-8).
    ///   - port: the TCP port of the WebSocket endpoint.
    ///   - txt: TXT entries in this order, e.g. `[("v", "1"), ("id", "7RQ4-K2M9-XW3D-8HNP")]`.
    ///     Nothing else is added: no user or host name unless the caller puts it here.
    ///   - onStateChange: called for every state change after `.starting`.
    public convenience init(name: String, port: Int, txt: [(String, String)],
                            onStateChange: @escaping @Sendable (PublisherState) -> Void) {
        self.init(name: name, port: port, txt: txt, retryInterval: .seconds(3), onStateChange: onStateChange)
    }

    /// Same, with TXT entries sorted by key.
    public convenience init(name: String, port: Int, txt: [String: String],
                            onStateChange: @escaping @Sendable (PublisherState) -> Void) {
        self.init(name: name, port: port, txt: txt.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                  retryInterval: .seconds(3), onStateChange: onStateChange)
    }

    init(name: String, port: Int, txt: [(String, String)], retryInterval: Duration,
         onStateChange: @escaping @Sendable (PublisherState) -> Void) {
        let events = EventQueue(label: "speakbridge.mdns.publisher", handler: onStateChange)
        var invalid: String?
        var entries: [TXTEntry] = []
        do {
            entries = try TXTRecord.validate(txt)
        } catch {
            invalid = error.description
        }
        if name.isEmpty || name.utf8.count > 63 {
            invalid = "service name must be 1 to 63 bytes of UTF-8, got \(name.utf8.count)"
        } else if !(1...65535).contains(port) {
            invalid = "port \(port) is not a TCP port"
        }
        switch LibAvahi.shared {
        case .success(let avahi):
            let core = PublisherCore(avahi: avahi, name: name, port: UInt16(clamping: port), txt: entries,
                                     events: events, retryInterval: retryInterval)
            self.core = core
            missing = nil
            core.begin(invalidInput: invalid)
        case .failure(let error):
            core = nil
            let state = PublisherState.failed(error.fullDescription)
            missing = state
            events.post(state)
        }
    }

    deinit {
        core?.shutdown()
    }

    /// The current state.
    public var state: PublisherState {
        if let missing { return missing }
        return core?.snapshot.withLock { $0.state } ?? .starting
    }

    /// The name the service is established under, which differs from the requested name after a
    /// collision ("Desk" -> "Desk #2"); nil while not established.
    public var publishedName: String? {
        core?.snapshot.withLock { $0.publishedName }
    }

    /// Withdraws the service (avahi sends goodbye packets) and stops. Idempotent; no state change
    /// is reported after it returns except one already being delivered.
    public func stop() {
        core?.shutdown()
    }
}

/// What other threads may read about a publisher.
struct PublisherSnapshot: Sendable {
    var state: PublisherState = .starting
    var publishedName: String?
}

/// The publisher's avahi side. See AvahiConnection for the threading rule; `snapshot` is the
/// only state other threads read.
final class PublisherCore: AvahiConnection, @unchecked Sendable {
    let snapshot = Locked(PublisherSnapshot())
    private let events: EventQueue<PublisherState>
    private let requestedName: String
    private let port: UInt16
    private let txt: [TXTEntry]
    private var name: String
    private var group: OpaquePointer?               // AvahiEntryGroup*
    private var reported: PublisherState = .starting
    private var retryTimer: PollTimer?
    /// Re-registers after a group collision, after `collisionWait`.
    private var collisionTimer: PollTimer?
    /// Group collisions since the name was last established (or the daemon came back).
    private var collisionsInARow = 0
    private static let maxRenames = 50

    /// How long the `collisions`-th collision in a row waits before it probes for the next name, in milliseconds: a
    /// random part of 1.5 s, then of 3 s, then of 6 s, so two hosts in step probe their next names at different
    /// moments (a probe takes avahi about a second).
    static func collisionWait(_ collisions: Int) -> Int {
        Int.random(in: 0...(1_500 << min(max(collisions - 1, 0), 2)))
    }

    init(avahi: sb_avahi_api, name: String, port: UInt16, txt: [TXTEntry], events: EventQueue<PublisherState>,
         retryInterval: Duration) {
        self.requestedName = name
        self.name = name
        self.port = port
        self.txt = txt
        self.events = events
        super.init(avahi: avahi, retryInterval: retryInterval)
    }

    func begin(invalidInput: String?) {
        if let invalidInput {
            report(.failed(invalidInput))
            return
        }
        retryTimer = makeTimer { [unowned self] in retryRegistration() }
        collisionTimer = makeTimer { [unowned self] in retryRegistration() }
        if let error = start(failIfAbsent: false) {
            report(.failed(error.description))
        }
    }

    override func shutdown() {
        events.close()
        super.shutdown()
    }

    // MARK: client hooks (poll thread)

    override func clientRunning(_ client: OpaquePointer) {
        if group == nil { register(client) }
    }

    override func clientNotReady(_ client: OpaquePointer) {
        if let group { _ = avahi.avahi_entry_group_reset(group) }
        report(.registering)
    }

    override func clientUnavailable(_ reason: String) {
        group = nil                                  // freed with its client
        name = requestedName
        retryTimer?.disarm()
        collisionTimer?.disarm()
        collisionsInARow = 0
        report(.noDaemon(reason))
    }

    // MARK: registration (poll thread)

    private func register(_ client: OpaquePointer) {
        if group == nil {
            let userdata = Unmanaged.passUnretained(self).toOpaque()
            // The group callback may already run inside avahi_entry_group_new (UNCOMMITED).
            guard let made = avahi.avahi_entry_group_new(client, avahiEntryGroupCallback, userdata) else {
                failAndRetry("cannot create an avahi entry group: \(message(avahi.avahi_client_errno(client)))")
                return
            }
            group = made
        }
        guard let group else { return }
        var renames = 0
        while true {
            let result = addService(to: group)
            if result == Int32(AVAHI_ERR_COLLISION) && renames < Self.maxRenames {
                rename()                             // another client of this daemon owns the name
                renames += 1
                continue
            }
            if result < 0 {
                failAndRetry("cannot add service \"\(name)\": \(message(result))")
                return
            }
            break
        }
        let committed = avahi.avahi_entry_group_commit(group)
        guard committed >= 0 else {
            failAndRetry("cannot commit service \"\(name)\": \(message(committed))")
            return
        }
        report(.registering)
    }

    private func addService(to group: OpaquePointer) -> Int32 {
        // add_pair prepends, and avahi serializes a list tail first: adding in the caller's
        // order puts the strings on the wire in that order (checked with python-zeroconf).
        var list: UnsafeMutablePointer<AvahiStringList>? = nil
        for entry in txt {
            list = avahi.avahi_string_list_add_pair(list, entry.key, entry.value)
        }
        defer { avahi.avahi_string_list_free(list) }
        if !txt.isEmpty && list == nil { return Int32(AVAHI_ERR_NO_MEMORY) }
        return avahi.avahi_entry_group_add_service_strlst(
            group, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(rawValue: 0),
            name, MDNSConstants.serviceType, nil, nil, port, list)
    }

    private func rename() {
        guard let alternative = avahi.avahi_alternative_service_name(name) else { return }
        name = String(cString: alternative)
        avahi.avahi_free(alternative)
    }

    private func failAndRetry(_ reason: String) {
        if let group { _ = avahi.avahi_entry_group_reset(group) }
        report(.failed(reason))
        retryTimer?.arm(after: retryInterval)
    }

    private func retryRegistration() {
        guard !isShutDown, let client, avahi.avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING else { return }
        if let group { _ = avahi.avahi_entry_group_reset(group) }
        register(client)
    }

    fileprivate func groupStateChanged(_ group: OpaquePointer, _ state: AvahiEntryGroupState) {
        guard !isShutDown else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            collisionsInARow = 0
            report(.established(name: name))
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host's service won the probe for this name (or both lost it to each other): the next name
            // is probed after a random wait, so that two hosts in step get out of it (see the top of the file).
            collisionsInARow += 1
            rename()
            if collisionsInARow >= 2 && Bool.random() { rename() }
            _ = avahi.avahi_entry_group_reset(group)
            report(.registering)
            collisionTimer?.arm(after: .milliseconds(Self.collisionWait(collisionsInARow)))
        case AVAHI_ENTRY_GROUP_FAILURE:
            let error = avahi.avahi_client_errno(avahi.avahi_entry_group_get_client(group))
            failAndRetry("avahi could not publish \"\(name)\": \(message(error))")
        default:
            break                                    // UNCOMMITED, REGISTERING
        }
    }

    private func report(_ state: PublisherState) {
        guard state != reported else { return }
        // One absence is one event: a daemon restart goes "connection lost" -> "waiting for the
        // daemon" without the daemon coming back in between; the caller warns once.
        if case .noDaemon = state, case .noDaemon = reported { return }
        reported = state
        snapshot.withLock {
            $0.state = state
            if case .established(let name) = state { $0.publishedName = name } else { $0.publishedName = nil }
        }
        events.post(state)
    }
}

private func avahiEntryGroupCallback(_ group: OpaquePointer?, _ state: AvahiEntryGroupState, _ userdata: UnsafeMutableRawPointer?) {
    guard let group, let userdata else { return }
    // Unretained: groups die with the client, which the core frees before it goes away.
    Unmanaged<PublisherCore>.fromOpaque(userdata).takeUnretainedValue().groupStateChanged(group, state)
}
