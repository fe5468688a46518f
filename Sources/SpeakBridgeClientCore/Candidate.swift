/// An address to try, with where it came from (for messages and for remembering what worked).
public struct Candidate: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var source: String

    public init(host: String, port: Int, source: String) {
        self.host = host
        self.port = port
        self.source = source
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public static func == (a: Candidate, b: Candidate) -> Bool { a.host == b.host && a.port == b.port }
    public func hash(into h: inout Hasher) {
        h.combine(host)
        h.combine(port)
    }
}

/// One dial attempt, named by the core (the shell maps it to its socket's id).
public struct AttemptID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: AttemptID, b: AttemptID) -> Bool { a.raw < b.raw }
    public var description: String { "#\(raw)" }
}
