// Browsing for `_speakbridge._tcp` services and keeping their data current.
//
// Flow (poll thread):
//   1. clientRunning: one service browser on all interfaces and protocols.
//   2. Browser NEW (one per interface x protocol a service is seen on): open a resolver for that
//      report and keep it open; avahi calls it again with FOUND whenever the service's address,
//      port or TXT changes (e.g. the host got a new address and re-announced).
//   3. Resolver FOUND -> store the result in the ServiceTable; resolver FAILURE (nothing answered
//      within avahi's timeout, e.g. the address record was withdrawn) -> drop that report, free
//      the resolver, and resolve again a moment later while the browser still lists the service.
//   4. Browser REMOVE -> free the resolver, drop the report.
//   5. Every change of the merged table goes to `onChange` (the whole list) and to `services`.
//   6. Daemon gone -> the list empties; after reconnecting, step 1 runs again.
//   7. Browser ALL_FOR_NOW (avahi: the first answers are in, about 1 s after browsing started) and every
//      report seen so far resolved once (FOUND or FAILURE) -> `isComplete`, and `whenComplete`'s handler runs.
internal import CAvahi
import Dispatch
import Glibc
import SpeakBridgeSupport

/// Continuously browses for and resolves SpeakBridge services on every interface and IP protocol
/// avahi-daemon uses. Each service appears once, with the addresses of all its reports.
///
/// `onChange` receives the full current list after every change, in order, on a private serial
/// queue (never on avahi's thread; it may call `stop()`).
public final class MDNSBrowser: Sendable {
    private let core: BrowserCore

    /// Starts browsing. Throws `DiscoveryError.noDaemon` if avahi-daemon cannot be reached now;
    /// once started, the browser rides out daemon restarts by itself.
    public convenience init(onChange: @escaping @Sendable ([DiscoveredService]) -> Void) throws {
        try self.init(retryInterval: .seconds(3), onChange: onChange)
    }

    init(retryInterval: Duration, onChange: @escaping @Sendable ([DiscoveredService]) -> Void) throws {
        let avahi: sb_avahi_api
        switch LibAvahi.shared {
        case .success(let loaded): avahi = loaded
        case .failure(let missing): throw DiscoveryError.libraryMissing(missing)
        }
        core = BrowserCore(avahi: avahi, events: EventQueue(label: "speakbridge.mdns.browser", handler: onChange),
                           retryInterval: retryInterval)
        if let error = core.start(failIfAbsent: true) {
            core.shutdown()
            throw error
        }
    }

    deinit {
        core.shutdown()
    }

    /// The services currently known, sorted by name.
    public var services: [DiscoveredService] {
        core.snapshot.withLock { $0 }
    }

    /// avahi said its list is complete for now (ALL_FOR_NOW) and every service it listed was resolved once.
    public var isComplete: Bool {
        core.complete.withLock { $0 }
    }

    /// Runs `handler` once the list is complete (see `isComplete`; at once if it already is). It runs on avahi's
    /// thread with avahi's lock held, or on the caller's: it must only signal (a semaphore), never call back in.
    func whenComplete(_ handler: @escaping @Sendable () -> Void) {
        core.completeHandler.withLock { $0 = handler }
        if isComplete { handler() }
    }

    /// Stops browsing. Idempotent.
    public func stop() {
        core.shutdown()
    }

    /// Browses for `timeout` and returns what was resolved by then; returns as soon as a service
    /// matches `until`, if given. Blocks the calling thread.
    public static func browse(timeout: Duration,
                              until: (@Sendable (DiscoveredService) -> Bool)? = nil) throws -> [DiscoveredService] {
        var untilList: (@Sendable ([DiscoveredService]) -> Bool)?
        if let until {
            untilList = { services in services.contains(where: until) }
        }
        return try browse(timeout: timeout, untilList: untilList)
    }

    /// Browses for `timeout` and returns what was resolved by then; returns as soon as the whole list
    /// satisfies `untilList`, if given (see `DiscoveryStopRule`). Blocks the calling thread.
    /// With `orComplete`, also as soon as the list is complete for now (see `isComplete`).
    public static func browse(timeout: Duration, untilList: (@Sendable ([DiscoveredService]) -> Bool)?,
                              orComplete: Bool = false) throws -> [DiscoveredService] {
        let found = DispatchSemaphore(value: 0)
        let browser = try MDNSBrowser { services in
            if let untilList, untilList(services) { found.signal() }
        }
        if orComplete { browser.whenComplete { found.signal() } }
        defer { browser.stop() }
        _ = found.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(timeout)))
        return browser.services
    }

    static func nanoseconds(_ d: Duration) -> Int {
        let (seconds, attoseconds) = d.components
        guard seconds < Int64(Int.max / 1_000_000_000) - 1 else { return Int.max }
        return max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    }
}

/// The browser's avahi side. See AvahiConnection for the threading rule; `snapshot` is the only
/// state other threads read.
final class BrowserCore: AvahiConnection, @unchecked Sendable {
    let snapshot = Locked<[DiscoveredService]>([])
    /// ALL_FOR_NOW came and `unresolved` is empty (read by other threads).
    let complete = Locked<Bool>(false)
    /// Called once `complete` turns true (see `MDNSBrowser.whenComplete`).
    let completeHandler = Locked<(@Sendable () -> Void)?>(nil)
    private var allForNow = false
    /// Reports listed by the browser whose resolver has not answered (FOUND or FAILURE) yet.
    private var unresolved: Set<ResolveKey> = []
    private let events: EventQueue<[DiscoveredService]>
    private var browser: OpaquePointer?             // AvahiServiceBrowser*
    private var browsed: [ResolveKey: Bool] = [:]   // reports the browser lists -> published locally
    private var resolvers: [ResolveKey: OpaquePointer] = [:]
    private var keysByResolver: [OpaquePointer: ResolveKey] = [:]
    private var pendingResolves: Set<ResolveKey> = []
    private var table = ServiceTable()
    private var emitted: [DiscoveredService] = []
    private var resolveTimer: PollTimer?
    private var browserTimer: PollTimer?
    /// Pause before resolving again after a resolver failed.
    private let resolveRetry: Duration = .seconds(1)

    init(avahi: sb_avahi_api, events: EventQueue<[DiscoveredService]>, retryInterval: Duration) {
        self.events = events
        super.init(avahi: avahi, retryInterval: retryInterval)
    }

    override func start(failIfAbsent: Bool) -> DiscoveryError? {
        resolveTimer = makeTimer { [unowned self] in resolvePending() }
        browserTimer = makeTimer { [unowned self] in
            if let client, browser == nil, avahi.avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING {
                clientRunning(client)
            }
        }
        return super.start(failIfAbsent: failIfAbsent)
    }

    override func shutdown() {
        events.close()
        super.shutdown()
    }

    // MARK: client hooks (poll thread)

    override func clientRunning(_ client: OpaquePointer) {
        guard browser == nil else { return }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        browser = avahi.avahi_service_browser_new(client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC),
                                            MDNSConstants.serviceType, nil, AvahiLookupFlags(rawValue: 0),
                                            avahiServiceBrowserCallback, userdata)
        if browser == nil { browserTimer?.arm(after: retryInterval) }
    }

    override func clientUnavailable(_ reason: String) {
        // The browser and resolvers die with their client: forget, don't free.
        browser = nil
        forgetAll()
    }

    // MARK: browse and resolve events (poll thread)

    fileprivate func browseEvent(_ browser: OpaquePointer, _ event: AvahiBrowserEvent, _ key: ResolveKey,
                                 _ flags: AvahiLookupResultFlags) {
        guard !isShutDown else { return }
        switch event {
        case AVAHI_BROWSER_NEW:
            if browsed[key] == nil { unresolved.insert(key) }
            browsed[key] = flags.rawValue & AVAHI_LOOKUP_RESULT_LOCAL.rawValue != 0
            if resolvers[key] == nil { startResolver(key) }
        case AVAHI_BROWSER_REMOVE:
            browsed[key] = nil
            pendingResolves.remove(key)
            stopResolver(key)
            if table.remove(key) { emitIfChanged() }
            resolvedOnce(key)
        case AVAHI_BROWSER_FAILURE:
            // Usually the daemon went away (the client reports that too); start over later.
            _ = avahi.avahi_service_browser_free(browser)
            self.browser = nil
            for key in Array(resolvers.keys) { stopResolver(key) }
            forgetAll()
            browserTimer?.arm(after: retryInterval)
        case AVAHI_BROWSER_ALL_FOR_NOW:
            allForNow = true
            resolvedOnce(nil)
        default:
            break                                    // CACHE_EXHAUSTED
        }
    }

    fileprivate func resolveEvent(_ resolver: OpaquePointer, _ event: AvahiResolverEvent, _ found: Resolution?) {
        guard !isShutDown, let key = keysByResolver[resolver] else { return }
        if event == AVAHI_RESOLVER_FOUND, var found {
            found.isLocal = found.isLocal || (browsed[key] ?? false)
            if table.update(key, found) { emitIfChanged() }
            resolvedOnce(key)
            return
        }
        // FAILURE: the service data is not (or no longer) available on this report.
        stopResolver(key)
        if table.remove(key) { emitIfChanged() }
        if browsed[key] != nil {
            pendingResolves.insert(key)
            resolveTimer?.arm(after: resolveRetry)
        }
        resolvedOnce(key)
    }

    /// `key` had its first answer (nil: none, ALL_FOR_NOW came); once the list is complete, says so once.
    private func resolvedOnce(_ key: ResolveKey?) {
        if let key { unresolved.remove(key) }
        guard allForNow, unresolved.isEmpty, !complete.withLock({ $0 }) else { return }
        complete.withLock { $0 = true }
        completeHandler.withLock { $0 }?()
    }

    private func startResolver(_ key: ResolveKey) {
        guard let client else { return }
        let proto = AvahiProtocol(key.ipVersion == 6 ? AVAHI_PROTO_INET6 : AVAHI_PROTO_INET)
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        // Address family = the protocol of the report: an IPv4 report resolves A records, an
        // IPv6 report AAAA records, so every address shows up exactly once.
        guard let resolver = avahi.avahi_service_resolver_new(client, key.interface, proto, key.name, key.type, key.domain,
                                                        proto, AvahiLookupFlags(rawValue: 0),
                                                        avahiServiceResolverCallback, userdata) else {
            pendingResolves.insert(key)
            resolveTimer?.arm(after: resolveRetry)
            return
        }
        resolvers[key] = resolver
        keysByResolver[resolver] = key
    }

    private func stopResolver(_ key: ResolveKey) {
        guard let resolver = resolvers.removeValue(forKey: key) else { return }
        keysByResolver[resolver] = nil
        _ = avahi.avahi_service_resolver_free(resolver)
    }

    private func resolvePending() {
        guard !isShutDown else { return }
        let keys = pendingResolves
        pendingResolves.removeAll()
        for key in keys where browsed[key] != nil && resolvers[key] == nil {
            startResolver(key)
        }
    }

    private func forgetAll() {
        browsed.removeAll()
        unresolved.removeAll()
        resolvers.removeAll()
        keysByResolver.removeAll()
        pendingResolves.removeAll()
        table.removeAll()
        emitIfChanged()
    }

    private func emitIfChanged() {
        let services = table.services
        guard services != emitted else { return }
        emitted = services
        snapshot.withLock { $0 = services }
        events.post(services)
    }
}

// MARK: C trampolines (non-capturing; the core comes back as userdata)

private func avahiServiceBrowserCallback(
    _ browser: OpaquePointer?, _ interface: AvahiIfIndex, _ proto: AvahiProtocol, _ event: AvahiBrowserEvent,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ flags: AvahiLookupResultFlags, _ userdata: UnsafeMutableRawPointer?
) {
    guard let browser, let userdata else { return }
    let key = ResolveKey(interface: interface, ipVersion: proto == AvahiProtocol(AVAHI_PROTO_INET6) ? 6 : 4,
                         name: name.map { String(cString: $0) } ?? "",
                         type: type.map { String(cString: $0) } ?? MDNSConstants.serviceType,
                         domain: domain.map { String(cString: $0) } ?? "local")
    // Unretained: browsers die with the client, which the core frees before it goes away.
    Unmanaged<BrowserCore>.fromOpaque(userdata).takeUnretainedValue().browseEvent(browser, event, key, flags)
}

private func avahiServiceResolverCallback(
    _ resolver: OpaquePointer?, _ interface: AvahiIfIndex, _ proto: AvahiProtocol, _ event: AvahiResolverEvent,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ hostName: UnsafePointer<CChar>?, _ address: UnsafePointer<AvahiAddress>?, _ port: UInt16,
    _ txt: UnsafeMutablePointer<AvahiStringList>?, _ flags: AvahiLookupResultFlags, _ userdata: UnsafeMutableRawPointer?
) {
    guard let resolver, let userdata else { return }
    let core = Unmanaged<BrowserCore>.fromOpaque(userdata).takeUnretainedValue()
    var found: Resolution?
    if event == AVAHI_RESOLVER_FOUND, let address {
        found = Resolution(hostName: hostName.map { String(cString: $0) } ?? "",
                           address: addressText(core.avahi, address, interface: interface),
                           port: Int(port),
                           txt: TXTRecord.decode(txtStrings(core.avahi, txt)),
                           isLocal: flags.rawValue & AVAHI_LOOKUP_RESULT_LOCAL.rawValue != 0)
    }
    core.resolveEvent(resolver, event, found)
}

/// avahi's text form of `address`, with the interface as zone for IPv6 link-local addresses.
private func addressText(_ avahi: sb_avahi_api, _ address: UnsafePointer<AvahiAddress>, interface: AvahiIfIndex) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
    guard avahi.avahi_address_snprint(&buffer, buffer.count, address) != nil else { return nil }
    let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    let a = address.pointee
    let isLinkLocal = a.proto == AvahiProtocol(AVAHI_PROTO_INET6)
        && a.data.ipv6.address.0 == 0xFE && (a.data.ipv6.address.1 & 0xC0) == 0x80
    var interfaceName: String?
    if isLinkLocal, interface > 0 {
        var name = [CChar](repeating: 0, count: 64)
        if if_indextoname(UInt32(interface), &name) != nil {
            interfaceName = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
    }
    return ResolvedAddress.format(text, isIPv6LinkLocal: isLinkLocal, interfaceName: interfaceName)
}

/// The raw TXT strings of `list`, which a resolver hands over in wire order (measured: a peer's
/// "id=a" "ID=b" arrive in that order; unlike lists made for publishing, see addService).
private func txtStrings(_ avahi: sb_avahi_api, _ list: UnsafeMutablePointer<AvahiStringList>?) -> [[UInt8]] {
    var strings: [[UInt8]] = []
    var node = list
    while let current = node {
        let size = Int(avahi.avahi_string_list_get_size(current))
        if let text = avahi.avahi_string_list_get_text(current) {
            strings.append(Array(UnsafeBufferPointer(start: text, count: size)))
        }
        node = avahi.avahi_string_list_get_next(current)
    }
    return strings
}
