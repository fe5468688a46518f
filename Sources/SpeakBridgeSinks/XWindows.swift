internal import Glibc
import SpeakBridgeProtocol
internal import SpeakBridgeSupport

/// Window queries on one X connection (the caller holds `XKeyboard`'s lock): which top-level window has the
/// keyboard focus, its title, whether a window still exists.
///
/// "Top-level" is the ancestor just below the root window: the application window without a window manager, its
/// frame with a reparenting one. Focus inside one application (a text field, a child window) is the same window.
struct XWindows {
    let lib: XLib
    let connection: XKeyboard.Connection

    private static let pointerRoot: UInt = 1

    /// The focused top-level window, nil when nothing has the focus. With focus "PointerRoot" (or on the root
    /// window), keys go to the window under the pointer, so that one is the answer.
    func focused() -> FocusedWindow? {
        let display = connection.display
        var focus: UInt = 0
        var revert: Int32 = 0
        _ = lib.getInputFocus(display, &focus, &revert)
        if focus == 0 { return nil }
        var window = focus
        if focus == Self.pointerRoot || focus == connection.root {
            var root: UInt = 0, child: UInt = 0
            var x: Int32 = 0, y: Int32 = 0, wx: Int32 = 0, wy: Int32 = 0
            var mask: UInt32 = 0
            _ = lib.queryPointer(display, connection.root, &root, &child, &x, &y, &wx, &wy, &mask)
            guard child != 0 else { return nil }
            window = child
        }
        let path = ancestors(of: window)
        guard let top = path.last else { return nil }
        let name = path.lazy.compactMap { title(of: $0) }.first ?? titleBelow(top) ?? "window 0x\(String(top, radix: 16))"
        return FocusedWindow(id: top, name: name)
    }

    /// Whether the window `id` still exists.
    func exists(_ id: UInt) -> Bool {
        var root: UInt = 0, parent: UInt = 0
        var children: UnsafeMutablePointer<UInt>?
        var count: UInt32 = 0
        let ok = lib.queryTree(connection.display, id, &root, &parent, &children, &count)
        if let children { _ = lib.free(children) }
        return ok != 0
    }

    /// `window` and its ancestors up to (not including) the root; empty when the window is gone.
    private func ancestors(of window: UInt) -> [UInt] {
        var path: [UInt] = []
        var current = window
        while path.count < 64 {
            var root: UInt = 0, parent: UInt = 0
            var children: UnsafeMutablePointer<UInt>?
            var count: UInt32 = 0
            guard lib.queryTree(connection.display, current, &root, &parent, &children, &count) != 0 else { return path }
            if let children { _ = lib.free(children) }
            path.append(current)
            if parent == 0 || parent == root { break }
            current = parent
        }
        return path
    }

    /// The first title among the children (and grandchildren) of a frame window: the client window inside a
    /// window manager's frame.
    private func titleBelow(_ window: UInt) -> String? {
        var level = [window]
        for _ in 0..<2 {
            var next: [UInt] = []
            for parent in level {
                var root: UInt = 0, up: UInt = 0
                var children: UnsafeMutablePointer<UInt>?
                var count: UInt32 = 0
                guard lib.queryTree(connection.display, parent, &root, &up, &children, &count) != 0 else { continue }
                if let children {
                    next += Array(UnsafeBufferPointer(start: children, count: Int(min(count, 64))))
                    _ = lib.free(children)
                }
            }
            if let found = next.lazy.compactMap({ title(of: $0) }).first { return found }
            level = Array(next.prefix(64))
        }
        return nil
    }

    /// _NET_WM_NAME (UTF-8), else WM_NAME (Latin-1 when of type STRING), escaped for logs and at most 60
    /// characters; nil when the window has neither.
    func title(of window: UInt) -> String? {
        let netName = lib.internAtom(connection.display, "_NET_WM_NAME", 0)
        let wmName: UInt = 39  // XA_WM_NAME
        let string: UInt = 31  // XA_STRING
        for atom in [netName, wmName] where atom != 0 {
            var type: UInt = 0, items: UInt = 0, after: UInt = 0
            var format: Int32 = 0
            var data: UnsafeMutablePointer<UInt8>?
            let status = lib.getWindowProperty(connection.display, window, atom, 0, 64, 0, 0,
                                               &type, &format, &items, &after, &data)
            defer { if let data { _ = lib.free(data) } }
            guard status == 0, let data, format == 8, items > 0 else { continue }
            let bytes = UnsafeBufferPointer(start: data, count: Int(min(items, 256)))
            let text = type == string ? String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
                                      : String(decoding: bytes, as: UTF8.self)
            let clean = PeerText.escape(text)
            if clean.isEmpty { continue }
            return clean.count > 60 ? String(clean.prefix(59)) + "…" : clean
        }
        return nil
    }
}

/// The modifier state of the X server's core keyboard (XQueryPointer's mask) and which modifier bit is Num Lock.
struct XModifiers {
    let mask: UInt32
    let numLockBit: UInt32?

    init(lib: XLib, connection: XKeyboard.Connection, layout: KeyboardLayout) {
        var root: UInt = 0, child: UInt = 0
        var x: Int32 = 0, y: Int32 = 0, wx: Int32 = 0, wy: Int32 = 0
        var mask: UInt32 = 0
        _ = lib.queryPointer(connection.display, connection.root, &root, &child, &x, &y, &wx, &wy, &mask)
        self.mask = mask
        numLockBit = Self.numLockBit(lib: lib, display: connection.display, layout: layout)
    }

    var capsLockOn: Bool { mask & 0x02 != 0 }

    /// The active XKB layout group (0 = the first layout), bits 13–14 of the state (XKB protocol, "Computing A
    /// State Field from an XKB State").
    var group: UInt32 { (mask >> 13) & 0x3 }

    /// Names of the modifiers held down that would change what keys do (not Caps Lock, not Num Lock).
    func heldNames() -> [String]? {
        let names: [(UInt32, String)] = [(0x01, "Shift"), (0x04, "Control"), (0x08, "Alt"), (0x10, "Mod2"),
                                         (0x20, "Mod3"), (0x40, "Super"), (0x80, "AltGr")]
        return names.filter { bit, _ in mask & bit != 0 && bit != numLockBit }.map(\.1)
    }

    /// XGetModifierMapping returns `XModifierKeymap { int max_keypermod; KeyCode *modifiermap; }`: 8 rows of
    /// `max_keypermod` keycodes (Shift, Lock, Control, Mod1…Mod5). Why unsafe: the struct is read by offset
    /// (the int, then the pointer at the next pointer-aligned offset), as Xlib.h lays it out.
    private static func numLockBit(lib: XLib, display: OpaquePointer, layout: KeyboardLayout) -> UInt32? {
        guard let numLock = layout.position(of: KeySymbol.numLock, shiftAvailable: false)?.keycode,
              let map = lib.getModifierMapping(display) else { return nil }
        defer { _ = lib.freeModifiermap(map) }
        let perModifier = Int(map.load(as: Int32.self))
        let offset = MemoryLayout<UnsafeRawPointer>.alignment
        guard perModifier > 0, perModifier <= 32,
              let keycodes = map.load(fromByteOffset: offset, as: UnsafePointer<UInt8>?.self) else { return nil }
        for modifier in 0..<8 {
            for slot in 0..<perModifier where Int(keycodes[modifier * perModifier + slot]) == numLock {
                return UInt32(1) << UInt32(modifier)
            }
        }
        return nil
    }
}
