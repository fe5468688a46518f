#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeTestSupport
@testable import SpeakBridgeStore

/// A private home under /tmp (each suite names its `root`) and the journal of one desktop in it, for the `Outbox`
/// suites; `cleanup()` removes the home.
protocol JournalFixture {
    var root: String { get }
}

/// The desktop whose journal the fixture's `path` is.
let journalFixtureDesktop = DeviceID(publicKeyDigest: SHA256.hash(Array("desk".utf8)))

extension JournalFixture {
    var home: Home { Home.resolve(override: root, environment: [:]) }
    var device: DeviceID { journalFixtureDesktop }
    var path: String { home.outboxDirectory + "/" + device.compact + ".journal" }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    /// `body` with `root`'s state directory on the failing disk (`FailingDisk`: FUSE, Tests/fuse/failfs.c); then
    /// the disk is unmounted and `root` removed.
    func withFailingDisk(_ body: (FailingDisk) throws -> Void) throws {
        mkdir(root, 0o700)
        let disk: FailingDisk
        do {
            disk = try FailingDisk(over: root + "/state")
        } catch {
            cleanup()
            throw error
        }
        defer {
            disk.unmount()
            cleanup()
        }
        try body(disk)
    }
}
