import Foundation
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore

/// A private directory for one progress log, and two devices to record for: what ProgressLogTests and
/// ProgressSlotTests share. A conforming suite names its directory (`root`, unique per instance).
protocol ProgressLogFixture {
    var root: String { get }
}

extension ProgressLogFixture {
    var path: String { root + "/progress.log" }
    var device: DeviceID { DeviceID(publicKeyDigest: SHA256.hash(Array("device".utf8))) }
    var other: DeviceID { DeviceID(publicKeyDigest: SHA256.hash(Array("other".utf8))) }

    func prepare() throws { try FileIO.makeDirectory(root) }
    func cleanup() { try? FileManager.default.removeItem(atPath: root) }
}
