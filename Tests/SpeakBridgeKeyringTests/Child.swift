#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeTestSupport

typealias Child = SpawnedChild
typealias ChildError = SpawnError

/// Runs a short command to completion: (exit status, stdout+stderr).
func run(_ argv: [String], environment: [String: String], stdin: String? = nil) throws -> (status: Int32, output: String) {
    let child = try Child(argv, environment: environment, stdin: stdin)
    let status = child.wait()
    let output = child.output
    unlink(child.outputPath)
    return (status, output)
}
