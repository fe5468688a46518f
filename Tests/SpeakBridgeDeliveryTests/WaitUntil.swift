#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Polls `condition` every millisecond until it holds; throws `DeliveryPipelineTests.HarnessTimeout(what)` once
/// `timeout` seconds have passed without it (the delivery suites' one wait).
func waitUntil(_ what: String, timeout: Double = 30, _ condition: () -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        guard Date() < deadline else { throw DeliveryPipelineTests.HarnessTimeout(what: what) }
        usleep(1_000)
    }
}
