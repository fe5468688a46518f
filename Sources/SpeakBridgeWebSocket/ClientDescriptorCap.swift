#if canImport(Glibc)
import Glibc
#endif
import SpeakBridgeSupport

/// The soft descriptor limit a client context is created under.
///
/// lws 4.1.6 sizes two tables at context creation by `sysconf(_SC_OPEN_MAX)` (the soft RLIMIT_NOFILE) and zeroes
/// them: the fd → wsi map (8 bytes per possible descriptor) and the pollfd array (8 more). Under a soft limit of
/// 20,000 that is 320 KB touched at every `send` start — about 75 page faults and 0.3 M instructions of memset on
/// the socket thread, for a process that holds a handful of descriptors. (`fd_limit_per_thread`, lws's own knob,
/// switches the map to a linear search on every poll event instead, a cost per line.)
///
/// So a client context is created with the soft limit lowered to `cap(current:highest:)` and put back right after
/// (`withLoweredLimit`): lws then keeps the fast map, sized to the cap, and refuses a socket whose number is at or
/// above it ("Socket fd … is too high": that dial fails). The cap leaves `headroom` numbers above the highest
/// descriptor open at creation, and is never below `floor` (the usual default soft limit) nor above the current
/// limit. A `send` opens a few descriptors per dialed address; `headroom` is far above what it needs.
/// The server's context is never capped: it holds one descriptor per device.
enum ClientDescriptorCap {
    static let floor = 1024
    /// RLIMIT_NOFILE as getrlimit's Glibc signature takes it (the enum imports as its own type).
    static let descriptorResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    static let headroom = 512

    /// The limit to create the context under; nil = leave it as it is.
    /// - Parameters: current: the soft limit now (`rlim_t` as Int, nil when unlimited or unknown);
    ///   highest: the highest descriptor number open (nil when it cannot be read: then nothing is lowered).
    static func cap(current: Int?, highest: Int?) -> Int? {
        guard let current, let highest, highest >= 0 else { return nil }
        let (needed, overflow) = highest.addingReportingOverflow(headroom + 1)
        guard !overflow else { return nil }
        let cap = max(floor, needed)
        return cap < current ? cap : nil
    }

    /// The highest descriptor number this process has open (from /proc/self/fd), or nil.
    static func highestOpenDescriptor() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var highest = -1
        while let entry = readdir(dir) {
            let number: Int? = directoryEntryName(entry) { name in
                var value = 0
                var digits = 0
                for byte in name {
                    guard byte >= 0x30, byte <= 0x39, digits < 9 else { return nil }
                    value = value * 10 + Int(byte - 0x30)
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            if let number { highest = max(highest, number) }
        }
        return highest
    }

    /// Runs `body` with the soft RLIMIT_NOFILE lowered to `cap`, then puts the previous limit back. Nothing is
    /// lowered when the limit cannot be read or set, or is already at or below the cap.
    static func withLoweredLimit<R>(_ body: () -> R) -> R {
        var limit = rlimit()
        guard getrlimit(descriptorResource, &limit) == 0 else { return body() }
        // RLIM_INFINITY is all ones (it does not import as a Swift constant): above Int.max, so nil here.
        let current: Int? = limit.rlim_cur > rlim_t(Int.max) ? nil : Int(limit.rlim_cur)
        guard let target = cap(current: current, highest: highestOpenDescriptor()) else { return body() }
        var lowered = limit
        lowered.rlim_cur = rlim_t(target)
        guard setrlimit(descriptorResource, &lowered) == 0 else { return body() }
        defer { _ = setrlimit(descriptorResource, &limit) }
        return body()
    }
}
