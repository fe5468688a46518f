internal import Glibc
internal import SpeakBridgeSupport

/// libX11 and libXtst, loaded at run time with dlopen: the few entry points the type sink and the clipboard probe
/// need, as typed C function pointers.
///
/// Why dlopen and not a `.systemLibrary` C leaf: the daemon must start on machines without any X library (a
/// headless `serve --sink stdout` over SSH); linking libX11 would make every sink depend on it. Only the type sink
/// on X11 and the clipboard probe load it, and say what to install when it is missing.
///
/// Why not libxdo (xdotool's library): its `xdo_enter_text_window` remaps a scratch keycode per character and
/// reverts it at once, so a client that looks the key up after the revert sees the wrong symbol (the non-ASCII
/// losses measured with `xdotool type --delay 0`), and it binds an upper-case keysym alone, which Xlib reads as
/// lower case unshifted (Ä came out as ä). `XKeyboard` keeps its bindings instead.
///
/// Error handling: Xlib's default handlers print and `exit()` the process. `load()` installs handlers that
/// count errors instead (`XErrorLog`), and every connection gets `XSetIOErrorExitHandler` (libX11 ≥ 1.8) with a
/// handler that returns, so a dying X server marks the connection dead instead of ending the daemon. Without
/// that function (older libX11) the library is refused. `XInitThreads` is the first call: connections may be
/// used from several threads (a sink thread, the startup probe, tests running in parallel).
///
/// C types on LP64 Linux: `Display *` → OpaquePointer, `Window`/`KeySym`/`Atom` (unsigned long) → UInt,
/// `KeyCode` (unsigned char) → UInt8, `Bool`/`Status`/`int` → Int32, `long` → Int.
struct XLib: Sendable {
    typealias Display = OpaquePointer
    typealias ErrorHandler = @convention(c) (Display?, UnsafeMutableRawPointer?) -> Int32
    typealias IOErrorHandler = @convention(c) (Display?) -> Int32
    typealias IOErrorExitHandler = @convention(c) (Display?, UnsafeMutableRawPointer?) -> Void

    let openDisplay: @convention(c) (UnsafePointer<CChar>?) -> Display?
    let closeDisplay: @convention(c) (Display?) -> Int32
    let connectionNumber: @convention(c) (Display?) -> Int32
    let setIOErrorExitHandler: @convention(c) (Display?, IOErrorExitHandler?, UnsafeMutableRawPointer?) -> Void
    let displayKeycodes: @convention(c) (Display?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32
    let getKeyboardMapping: @convention(c) (Display?, UInt8, Int32, UnsafeMutablePointer<Int32>?) -> UnsafeMutablePointer<UInt>?
    let changeKeyboardMapping: @convention(c) (Display?, Int32, Int32, UnsafeMutablePointer<UInt>?, Int32) -> Int32
    let getModifierMapping: @convention(c) (Display?) -> UnsafeMutableRawPointer?
    let freeModifiermap: @convention(c) (UnsafeMutableRawPointer?) -> Int32
    let free: @convention(c) (UnsafeMutableRawPointer?) -> Int32
    let sync: @convention(c) (Display?, Int32) -> Int32
    let getInputFocus: @convention(c) (Display?, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<Int32>?) -> Int32
    let defaultRootWindow: @convention(c) (Display?) -> UInt
    let queryPointer: @convention(c) (Display?, UInt, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<UInt>?,
                                      UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                      UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                      UnsafeMutablePointer<UInt32>?) -> Int32
    let queryTree: @convention(c) (Display?, UInt, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<UInt>?,
                                   UnsafeMutablePointer<UnsafeMutablePointer<UInt>?>?, UnsafeMutablePointer<UInt32>?) -> Int32
    let internAtom: @convention(c) (Display?, UnsafePointer<CChar>?, Int32) -> UInt
    let getWindowProperty: @convention(c) (Display?, UInt, UInt, Int, Int, Int32, UInt, UnsafeMutablePointer<UInt>?,
                                           UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<UInt>?,
                                           UnsafeMutablePointer<UInt>?,
                                           UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32
    let testQueryExtension: @convention(c) (Display?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                            UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32
    let testFakeKeyEvent: @convention(c) (Display?, UInt32, Int32, UInt) -> Int32

    /// The loaded library, or why it cannot be used (with what to install).
    static func load() throws(SinkError) -> XLib {
        switch loaded {
        case .success(let lib): return lib
        case .failure(let error): throw error
        }
    }

    private static let loaded: Result<XLib, SinkError> = {
        let missing = SinkError(message: "cannot load the X11 libraries (libX11.so.6 ≥ 1.8 and libXtst.so.6)",
                                hint: "install the Debian packages libx11-6 and libxtst6")
        // Why unsafe: dlopen/dlsym hand back untyped symbols, cast here to the C prototypes declared above
        // (X11/Xlib.h, X11/extensions/XTest.h). The handles stay open for the life of the process.
        guard let x11 = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL),
              let xtst = dlopen("libXtst.so.6", RTLD_NOW | RTLD_LOCAL) else { return .failure(missing) }
        func symbol<T>(_ handle: UnsafeMutableRawPointer, _ name: String, as type: T.Type = T.self) -> T? {
            guard let pointer = dlsym(handle, name) else { return nil }
            return unsafeBitCast(pointer, to: type)
        }
        typealias InitThreads = @convention(c) () -> Int32
        typealias SetErrorHandler = @convention(c) (ErrorHandler?) -> ErrorHandler?
        typealias SetIOErrorHandler = @convention(c) (IOErrorHandler?) -> IOErrorHandler?
        guard let initThreads = symbol(x11, "XInitThreads", as: InitThreads.self),
              let setErrorHandler = symbol(x11, "XSetErrorHandler", as: SetErrorHandler.self),
              let setIOErrorHandler = symbol(x11, "XSetIOErrorHandler", as: SetIOErrorHandler.self),
              let lib = XLib(
                openDisplay: symbol(x11, "XOpenDisplay"),
                closeDisplay: symbol(x11, "XCloseDisplay"),
                connectionNumber: symbol(x11, "XConnectionNumber"),
                setIOErrorExitHandler: symbol(x11, "XSetIOErrorExitHandler"),
                displayKeycodes: symbol(x11, "XDisplayKeycodes"),
                getKeyboardMapping: symbol(x11, "XGetKeyboardMapping"),
                changeKeyboardMapping: symbol(x11, "XChangeKeyboardMapping"),
                getModifierMapping: symbol(x11, "XGetModifierMapping"),
                freeModifiermap: symbol(x11, "XFreeModifiermap"),
                free: symbol(x11, "XFree"),
                sync: symbol(x11, "XSync"),
                getInputFocus: symbol(x11, "XGetInputFocus"),
                defaultRootWindow: symbol(x11, "XDefaultRootWindow"),
                queryPointer: symbol(x11, "XQueryPointer"),
                queryTree: symbol(x11, "XQueryTree"),
                internAtom: symbol(x11, "XInternAtom"),
                getWindowProperty: symbol(x11, "XGetWindowProperty"),
                testQueryExtension: symbol(xtst, "XTestQueryExtension"),
                testFakeKeyEvent: symbol(xtst, "XTestFakeKeyEvent"))
        else { return .failure(missing) }
        _ = initThreads()
        _ = setErrorHandler { _, _ in
            XErrorLog.protocolErrors.withLock { $0 &+= 1 }
            return 0
        }
        _ = setIOErrorHandler { _ in 0 }  // then the connection's exit handler (see `open`) marks it dead
        return .success(lib)
    }()

    /// Opens `name` (e.g. ":0") with an I/O-error exit handler that returns instead of exiting and raises the
    /// returned flag (read and written only by Xlib calls on this display, which the caller serialises); nil when
    /// the server cannot be reached (not running, or XAUTHORITY does not admit us). Throws when the server is
    /// another user's (`DisplayProbe.serverProblem`): the keys typed would go to them.
    func open(_ name: String) throws(SinkError) -> (display: Display, dead: UnsafeMutablePointer<Int32>)? {
        guard let display = name.withCString({ openDisplay($0) }) else { return nil }
        if let problem = DisplayProbe.serverProblem(connectionNumber(display), display: name) {
            _ = closeDisplay(display)
            throw problem
        }
        let dead = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        dead.initialize(to: 0)
        setIOErrorExitHandler(display, { _, flag in flag?.storeBytes(of: 1, as: Int32.self) }, UnsafeMutableRawPointer(dead))
        return (display, dead)
    }
}

/// Xlib reports errors through process-wide callbacks; they only count here. A caller compares the count around
/// a synchronous request (one that waits for the reply, or after `XSync`) to see whether a request failed; a
/// count moved by another connection at the same time only makes that caller more careful, never less.
enum XErrorLog {
    static let protocolErrors = Locked(0)
}

/// Optional members, so `XLib(...)` above fails as a whole (returns nil) when one symbol is missing.
private extension XLib {
    init?(openDisplay: (@convention(c) (UnsafePointer<CChar>?) -> Display?)?,
          closeDisplay: (@convention(c) (Display?) -> Int32)?,
          connectionNumber: (@convention(c) (Display?) -> Int32)?,
          setIOErrorExitHandler: (@convention(c) (Display?, IOErrorExitHandler?, UnsafeMutableRawPointer?) -> Void)?,
          displayKeycodes: (@convention(c) (Display?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32)?,
          getKeyboardMapping: (@convention(c) (Display?, UInt8, Int32, UnsafeMutablePointer<Int32>?) -> UnsafeMutablePointer<UInt>?)?,
          changeKeyboardMapping: (@convention(c) (Display?, Int32, Int32, UnsafeMutablePointer<UInt>?, Int32) -> Int32)?,
          getModifierMapping: (@convention(c) (Display?) -> UnsafeMutableRawPointer?)?,
          freeModifiermap: (@convention(c) (UnsafeMutableRawPointer?) -> Int32)?,
          free: (@convention(c) (UnsafeMutableRawPointer?) -> Int32)?,
          sync: (@convention(c) (Display?, Int32) -> Int32)?,
          getInputFocus: (@convention(c) (Display?, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<Int32>?) -> Int32)?,
          defaultRootWindow: (@convention(c) (Display?) -> UInt)?,
          queryPointer: (@convention(c) (Display?, UInt, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<UInt>?,
                                         UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                         UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                         UnsafeMutablePointer<UInt32>?) -> Int32)?,
          queryTree: (@convention(c) (Display?, UInt, UnsafeMutablePointer<UInt>?, UnsafeMutablePointer<UInt>?,
                                      UnsafeMutablePointer<UnsafeMutablePointer<UInt>?>?, UnsafeMutablePointer<UInt32>?) -> Int32)?,
          internAtom: (@convention(c) (Display?, UnsafePointer<CChar>?, Int32) -> UInt)?,
          getWindowProperty: (@convention(c) (Display?, UInt, UInt, Int, Int, Int32, UInt, UnsafeMutablePointer<UInt>?,
                                              UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<UInt>?,
                                              UnsafeMutablePointer<UInt>?,
                                              UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32)?,
          testQueryExtension: (@convention(c) (Display?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?,
                                               UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32)?,
          testFakeKeyEvent: (@convention(c) (Display?, UInt32, Int32, UInt) -> Int32)?) {
        guard let openDisplay, let closeDisplay, let connectionNumber, let setIOErrorExitHandler, let displayKeycodes, let getKeyboardMapping,
              let changeKeyboardMapping, let getModifierMapping, let freeModifiermap, let free, let sync,
              let getInputFocus, let defaultRootWindow, let queryPointer, let queryTree, let internAtom,
              let getWindowProperty, let testQueryExtension, let testFakeKeyEvent else { return nil }
        self.init(openDisplay: openDisplay, closeDisplay: closeDisplay, connectionNumber: connectionNumber,
                  setIOErrorExitHandler: setIOErrorExitHandler,
                  displayKeycodes: displayKeycodes, getKeyboardMapping: getKeyboardMapping,
                  changeKeyboardMapping: changeKeyboardMapping, getModifierMapping: getModifierMapping,
                  freeModifiermap: freeModifiermap, free: free, sync: sync, getInputFocus: getInputFocus,
                  defaultRootWindow: defaultRootWindow, queryPointer: queryPointer, queryTree: queryTree,
                  internAtom: internAtom, getWindowProperty: getWindowProperty,
                  testQueryExtension: testQueryExtension, testFakeKeyEvent: testFakeKeyEvent)
    }
}
