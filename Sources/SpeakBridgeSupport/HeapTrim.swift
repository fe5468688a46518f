#if canImport(Glibc)
import Glibc
#endif

/// Gives the heap's free pages back to the kernel: glibc's `malloc_trim(0)`, which releases the free top of every
/// arena and `madvise(MADV_DONTNEED)`s whole free pages inside them.
///
/// Why: after a burst (tens of thousands of chunks queued, decoded and freed on three threads) glibc keeps the
/// freed memory in its arenas, and the idle daemon stays about 0.6 MiB larger until the next burst reuses it.
/// Called by the delivery pipeline when it falls quiet after much work, never per chunk (a trim walks the arenas).
///
/// `malloc_trim` is glibc's (malloc.h), which the Glibc module does not export, so it is looked up once with
/// dlsym in the process's own namespace; a C library without it (not glibc) makes this do nothing.
public enum HeapTrim {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim: Trim? = {
        // RTLD_DEFAULT is a null handle on glibc: the global symbol scope of the process.
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
    }()

    /// True when some memory was released.
    @discardableResult
    public static func releaseFreePages() -> Bool {
        guard let trim else { return false }
        return trim(0) == 1
    }
}
