/// A failure of `join` or `send` that a user can act on.
public struct ClientError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var hint: String?
    /// Process exit status to use.
    public var exitCode: Int32

    public init(_ message: String, hint: String? = nil, exitCode: Int32 = 1) {
        self.message = message
        self.hint = hint
        self.exitCode = exitCode
    }

    public var description: String { message }
}
