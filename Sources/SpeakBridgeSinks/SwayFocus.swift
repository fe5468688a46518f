import SpeakBridgeProtocol
internal import SpeakBridgeSupport

/// Which window has the focus on sway, through its IPC (`swaymsg -t get_tree`): the Wayland virtual-keyboard
/// protocol has no focus query, but sway tells any client of its IPC socket ($SWAYSOCK) which container is focused.
/// This gives the type sink focus safety on sway; other Wayland compositors type without it (see `TypeSink`).
///
/// A window is a container of type "con" or "floating_con"; its id is stable while the window lives. The focused
/// node being a workspace (no window) means keys go nowhere.
struct SwayFocus: Sendable {
    let swaymsg: String
    let socket: String
    let environment: [String: String]

    /// Nil unless SWAYSOCK names a socket and swaymsg is in PATH.
    init?(environment: [String: String]) {
        guard let socket = environment["SWAYSOCK"], !socket.isEmpty,
              let swaymsg = ToolRunner.find("swaymsg", environment: environment) else { return nil }
        self.swaymsg = swaymsg
        self.socket = socket
        self.environment = environment
    }

    static let treeLimit = 8 << 20

    /// The focused window, nil when the focus is on an empty workspace.
    func focused() throws(SinkError) -> FocusedWindow? {
        Self.focused(in: try tree())
    }

    /// Whether a window with this container id still exists.
    func exists(_ id: UInt) -> Bool {
        guard let tree = try? tree() else { return true }
        return Self.find(in: tree) { Self.windowID($0) == id } != nil
    }

    private func tree() throws(SinkError) -> JSONValue {
        let output: [UInt8]
        do {
            output = try ToolRunner.run(swaymsg, ["-s", socket, "-t", "get_tree", "-r"], input: nil,
                                        environment: environment, timeout: .seconds(5), captureStdout: Self.treeLimit)
        } catch {
            throw SinkError(message: "cannot ask sway which window has the focus: " + error.message(tool: "swaymsg"),
                            hint: "check that SWAYSOCK=\(socket) is the running sway's socket")
        }
        do {
            return try JSONValue.parse(output, maxDepth: 256, maxBytes: Self.treeLimit)
        } catch {
            throw SinkError(message: "cannot read sway's window tree: \(error)")
        }
    }

    static func focused(in tree: JSONValue) -> FocusedWindow? {
        guard let node = find(in: tree, where: { $0["focused"]?.boolValue == true }), let id = windowID(node) else {
            return nil
        }
        let title = node["name"]?.stringValue ?? node["app_id"]?.stringValue ?? "window \(id)"
        let clean = PeerText.escape(title)
        return FocusedWindow(id: id, name: clean.count > 60 ? String(clean.prefix(59)) + "…" : clean)
    }

    /// The container id of a window node (nil for the root, outputs and workspaces).
    static func windowID(_ node: JSONValue) -> UInt? {
        guard let type = node["type"]?.stringValue, type == "con" || type == "floating_con",
              let id = node["id"]?.int64Value, id >= 0 else { return nil }
        return UInt(id)
    }

    /// Depth-first search over "nodes" and "floating_nodes".
    static func find(in node: JSONValue, where matches: (JSONValue) -> Bool) -> JSONValue? {
        if matches(node) { return node }
        for key in ["nodes", "floating_nodes"] {
            for child in node[key]?.arrayValue ?? [] {
                if let found = find(in: child, where: matches) { return found }
            }
        }
        return nil
    }
}
