import SpeakBridgeProtocol

/// One connection as the core knows it: an opaque number the shell maps to its transport's own handle.
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.rawValue < b.rawValue }

    public var description: String { "#\(rawValue)" }
}

/// A (device, session) and a sequence number: a durable ack level, or the first chunk a sink holds.
public struct SessionLevel: Sendable, Equatable {
    public var device: DeviceID
    public var session: String
    public var seq: UInt64

    public init(device: DeviceID, session: String, seq: UInt64) {
        self.device = device
        self.session = session
        self.seq = seq
    }
}

/// A line for the desktop's log. `message` may hold peer text: the shell's logger escapes it.
public struct LogLine: Sendable, Equatable {
    public enum Level: Sendable, Equatable { case debug, info, warning, error }

    public var level: Level
    public var message: String
    public var hint: String?

    public init(_ level: Level, _ message: String, hint: String? = nil) {
        self.level = level
        self.message = message
        self.hint = hint
    }
}
