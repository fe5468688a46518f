extension Array where Element: Hashable {
    /// The elements without repeats, first occurrences in order. A short list (the usual few addresses) is
    /// searched linearly: a `Set` of a type not used before costs the Swift runtime a scan of every protocol
    /// conformance record when its metadata is first made (~0.25 M instructions each, measured on a `send`'s way to
    /// its first line); a long one (an mDNS answer flood) still takes a `Set`, so the cost stays linear.
    func uniquedInOrder() -> [Element] {
        guard count > 16 else {
            var out: [Element] = []
            out.reserveCapacity(count)
            for element in self where !out.contains(element) { out.append(element) }
            return out
        }
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }

    /// The elements not in `excluded`, in order (`excluded` is usually the handful of open attempts: searched
    /// linearly then, through a `Set` when long).
    func excluding(_ excluded: [Element]) -> [Element] {
        if excluded.isEmpty { return self }
        guard excluded.count > 16 else { return filter { !excluded.contains($0) } }
        let set = Set(excluded)
        return filter { !set.contains($0) }
    }
}
