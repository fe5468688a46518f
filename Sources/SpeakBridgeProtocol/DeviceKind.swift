/// How a capture device speaks to the desktop: `native` (the ws:// route: `speakbridge send`, apps) or `browser`
/// (paired through the desktop's HTTPS page, PROTOCOL.md "Browser route"). A browser device may send dictation
/// but not pull or push config: the desktop core answers its `config-*` messages with `unknown-type`.
public enum DeviceKind: String, Sendable, Equatable {
    case native, browser
}
