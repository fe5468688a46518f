/// The X keysym that types a Unicode scalar: Latin-1 printable characters are their own keysym, a line feed is
/// Return, everything else is a Unicode keysym (0x01000000 + code point), which Xlib and XKB clients turn back
/// into the character (X11 keysym spec, "Unicode" section; also for scalars above U+FFFF such as emoji).
enum KeySymbol {
    static let returnKey: UInt = 0xFF0D
    static let shiftLeft: UInt = 0xFFE1
    static let capsLock: UInt = 0xFFE5
    static let numLock: UInt = 0xFF7F
    static let none: UInt = 0

    static func keysym(for scalar: Unicode.Scalar) -> UInt {
        switch scalar.value {
        case 0x0A: returnKey
        case 0x20...0x7E, 0xA0...0xFF: UInt(scalar.value)
        default: 0x0100_0000 + UInt(scalar.value)
        }
    }
}

/// A snapshot of the server's core keyboard mapping (XGetKeyboardMapping): which keysyms each keycode carries.
///
/// Only the first two columns (group 1, levels 1 and 2) are used for typing: column 0 needs no modifier, column 1
/// needs Shift. Core-protocol rule (X11 protocol, "Keyboards"): when column 1 is NoSymbol and column 0 is a
/// letter, the key gives the lower case unshifted and the upper case shifted — so a key holding only "Ä" types
/// "ä" without Shift. Such keys are used only for keysyms that have no case.
struct KeyboardLayout: Equatable {
    let minKeycode: Int
    let perKeycode: Int
    /// `perKeycode` keysyms for each keycode from `minKeycode` on.
    let symbols: [UInt]

    var maxKeycode: Int { minKeycode + symbols.count / max(perKeycode, 1) - 1 }

    func symbols(of keycode: Int) -> ArraySlice<UInt> {
        let start = (keycode - minKeycode) * perKeycode
        guard keycode >= minKeycode, keycode <= maxKeycode else { return [] }
        return symbols[start..<start + perKeycode]
    }

    /// Where `keysym` can be typed without changing the mapping: the lowest keycode, preferring no Shift.
    func position(of keysym: UInt, shiftAvailable: Bool) -> (keycode: Int, shift: Bool)? {
        guard keysym != KeySymbol.none, perKeycode > 0 else { return nil }
        var shifted: Int?
        for keycode in minKeycode...max(minKeycode, maxKeycode) {
            let syms = symbols(of: keycode)
            guard let first = syms.first else { continue }
            let second = syms.count > 1 ? syms[syms.startIndex + 1] : KeySymbol.none
            if second == KeySymbol.none {
                // Xlib reads a lone letter as (lower, upper): usable only for keysyms without case.
                if first == keysym, Self.caseless(keysym) { return (keycode, false) }
                continue
            }
            if first == keysym { return (keycode, false) }
            if second == keysym, shifted == nil { shifted = keycode }
        }
        if shiftAvailable, let shifted { return (shifted, true) }
        return nil
    }

    /// Keycodes that carry no keysym at all: free to bind (no physical key produces anything with them).
    var unusedKeycodes: [Int] {
        guard perKeycode > 0, maxKeycode >= minKeycode else { return [] }
        return (minKeycode...maxKeycode).filter { symbols(of: $0).allSatisfy { $0 == KeySymbol.none } }
    }

    /// Keycodes of vendor multimedia keys (every keysym in the XF86 range 0x1008FF00–0x1008FFFF, e.g.
    /// XF86Launch5): when the layout has no unused keycode (Xvfb's has none), these are borrowed, highest first,
    /// at most `limit`; `XKeyboard` gives their own symbols back when idle and on close.
    func borrowableKeycodes(limit: Int) -> [Int] {
        guard perKeycode > 0, maxKeycode >= minKeycode else { return [] }
        let vendor: ClosedRange<UInt> = 0x1008_FF00...0x1008_FFFF
        return (minKeycode...maxKeycode).reversed().filter { keycode in
            let syms = symbols(of: keycode).filter { $0 != KeySymbol.none }
            return !syms.isEmpty && syms.allSatisfy { vendor.contains($0) }
        }.prefix(limit).map { $0 }
    }

    /// Whether `keycode` holds what `XKeyboard` binds for `keysym`: the keysym at levels 1 and 2, and nothing
    /// else (an XKB server reports the binding back with the keysym copied into the other group's columns).
    func holdsBinding(_ keysym: UInt, at keycode: Int) -> Bool {
        let syms = Array(symbols(of: keycode))
        guard syms.count >= 2 else { return syms.first == keysym }
        return syms[0] == keysym && syms[1] == keysym && syms.allSatisfy { $0 == keysym || $0 == KeySymbol.none }
    }

    /// The keysym list that binds `keysym` to one keycode: the same symbol at both levels, so neither Shift nor
    /// Xlib's case rule can change it.
    func binding(for keysym: UInt) -> [UInt] {
        var row = [UInt](repeating: KeySymbol.none, count: max(perKeycode, 2))
        row[0] = keysym
        row[1] = keysym
        return row
    }

    /// True when lower and upper case of the keysym's character are the same (digits, punctuation, CJK…).
    static func caseless(_ keysym: UInt) -> Bool {
        let code: UInt
        switch keysym {
        case 0x20...0xFF: code = keysym
        case 0x0100_0000...0x0110_FFFF: code = keysym - 0x0100_0000
        default: return true  // function keys such as Return
        }
        guard let scalar = Unicode.Scalar(UInt32(code)) else { return true }
        let text = String(scalar)
        return text.lowercased() == text && text.uppercased() == text
    }
}

/// The spare keycodes `XKeyboard` binds characters to when the layout lacks them.
///
/// A binding stays in place after typing (no revert after each character): a client looks a key event up in the
/// mapping it fetches when it handles the event, which can be well after the server sent it, and by then an
/// at-once revert (what xdotool does) has already taken the character away. A keycode is rebound only when its
/// last use is at least `minimumAge` old (least recently used first); until then the typist waits. The bindings
/// are removed when the sink closes; borrowed keycodes get their own symbols back after `XKeyboard.restoreAge` idle.
struct ScratchKeys: Equatable {
    struct Slot: Equatable {
        var keycode: Int
        /// The keysyms the keycode had before (empty for an unused keycode), given back by `release`.
        var original: [UInt]
        var keysym: UInt?
        var lastUse: ContinuousClock.Instant?
    }

    enum Assignment: Equatable {
        /// Already bound here.
        case bound(keycode: Int)
        /// Bind here first.
        case bind(keycode: Int)
        /// Every keycode was used too recently; ask again at this instant.
        case wait(until: ContinuousClock.Instant)
        /// There is no spare keycode at all.
        case unavailable
    }

    private(set) var slots: [Slot]
    let minimumAge: Duration

    /// Unused keycodes first, then borrowed ones with their original symbols.
    init(unused: [Int], borrowed: [(keycode: Int, original: [UInt])] = [], minimumAge: Duration) {
        slots = unused.map { Slot(keycode: $0, original: [], keysym: nil, lastUse: nil) }
            + borrowed.map { Slot(keycode: $0.keycode, original: $0.original, keysym: nil, lastUse: nil) }
        self.minimumAge = minimumAge
    }

    var count: Int { slots.count }

    func isScratch(_ keycode: Int) -> Bool { slots.contains { $0.keycode == keycode } }

    /// Where to type `keysym`; records the binding when the answer is `.bind` (the caller must then bind it).
    mutating func assign(_ keysym: UInt, now: ContinuousClock.Instant) -> Assignment {
        if let slot = slots.first(where: { $0.keysym == keysym }) { return .bound(keycode: slot.keycode) }
        guard !slots.isEmpty else { return .unavailable }
        if let free = slots.firstIndex(where: { $0.keysym == nil }) {
            slots[free].keysym = keysym
            return .bind(keycode: slots[free].keycode)
        }
        // Least recently used (a bound slot always has a lastUse once typed; one without was bound and not yet
        // used, which cannot happen between two calls, so treat it as oldest).
        let oldest = slots.indices.min { (slots[$0].lastUse ?? now - .seconds(3600)) < (slots[$1].lastUse ?? now - .seconds(3600)) }!
        let lastUse = slots[oldest].lastUse ?? now - .seconds(3600)
        if now - lastUse < minimumAge { return .wait(until: lastUse + minimumAge) }
        slots[oldest].keysym = keysym
        slots[oldest].lastUse = nil
        return .bind(keycode: slots[oldest].keycode)
    }

    mutating func used(_ keycode: Int, at now: ContinuousClock.Instant) {
        if let index = slots.firstIndex(where: { $0.keycode == keycode }) { slots[index].lastUse = now }
    }

    /// Drops bindings the server no longer holds (someone else changed the mapping, e.g. a layout switch) and
    /// slots whose keycode now carries other symbols than its original ones.
    mutating func reconcile(with layout: KeyboardLayout) {
        slots = slots.compactMap { slot in
            if let keysym = slot.keysym, layout.holdsBinding(keysym, at: slot.keycode) { return slot }
            let now = Array(layout.symbols(of: slot.keycode))
            let unchanged = slot.original.isEmpty ? now.allSatisfy { $0 == KeySymbol.none }
                                                  : Array(now.prefix(slot.original.count)) == slot.original
            guard unchanged else { return nil }
            return Slot(keycode: slot.keycode, original: slot.original, keysym: nil, lastUse: nil)
        }
    }

    /// Bound slots whose last use is at least `age` old (all bound slots when `age` is nil), of borrowed keycodes
    /// only when `borrowedOnly`: the caller gives them their original symbols back (`restoreRow`); they are marked
    /// free here. (Bindings on unused keycodes can stay: no key produces them, and every mapping change makes
    /// every X client reload its keymap.)
    mutating func release(olderThan age: Duration?, now: ContinuousClock.Instant, borrowedOnly: Bool = false) -> [Slot] {
        var released: [Slot] = []
        for index in slots.indices where slots[index].keysym != nil && !(borrowedOnly && slots[index].original.isEmpty) {
            if let age, let lastUse = slots[index].lastUse, now - lastUse < age { continue }
            released.append(slots[index])
            slots[index].keysym = nil
            slots[index].lastUse = nil
        }
        return released
    }

    /// What a released slot's keycode gets back: its original symbols, or NoSymbol.
    static func restoreRow(_ slot: Slot, perKeycode: Int) -> [UInt] {
        var row = [UInt](repeating: KeySymbol.none, count: max(perKeycode, 2))
        for (index, keysym) in slot.original.prefix(row.count).enumerated() { row[index] = keysym }
        return row
    }
}
