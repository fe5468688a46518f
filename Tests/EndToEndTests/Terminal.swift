import Foundation

/// Runs a command on a pseudo-terminal with script(1), which copies what appears on it into a typescript file:
/// for what `speakbridge` does only when stderr is a terminal (the pairing code, the live status line).
enum PseudoTerminal {
    static let isAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/script")

    /// Starts `command` (a shell command line) on a pseudo-terminal; returns the script process and the pipe that
    /// is its keyboard. The environment is the tests' usual one: no SPEAKBRIDGE_HOME, secrets in files.
    static func start(_ command: String, typescript: String) throws -> (Process, Pipe) {
        let script = Process()
        script.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        script.arguments = ["-qfec", command, typescript]
        var environment = ProcessInfo.processInfo.environment
        environment["SPEAKBRIDGE_HOME"] = nil
        environment["SPEAKBRIDGE_SECRETS"] = "file"
        script.environment = environment
        let keyboard = Pipe()
        script.standardInput = keyboard
        script.standardOutput = FileHandle.nullDevice
        script.standardError = FileHandle.nullDevice
        try script.run()
        return (script, keyboard)
    }
}
