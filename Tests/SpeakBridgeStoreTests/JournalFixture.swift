import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
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
}
