#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeConfig
import SpeakBridgeProtocol
import SpeakBridgeStore
import Testing

/// Counts the reads of a file backend: each `value` and each `values` call reads and parses the whole file.
/// `@unchecked Sendable` is sound: `count` is read and written only with `lock` held; `inner` is immutable.
final class CountingBackend: SecretBackend, @unchecked Sendable {
    let inner: FileSecretBackend
    let lock = NSLock()
    var count = 0
    init(_ inner: FileSecretBackend) { self.inner = inner }
    var reads: Int { lock.withLock { count } }
    func reset() { lock.withLock { count = 0 } }
    var summary: String { inner.summary }
    func value(ref: String) throws(ConfigError) -> String? {
        lock.withLock { count += 1 }
        return try inner.value(ref: ref)
    }
    func values(refs: [String]) throws(ConfigError) -> [String: String] {
        lock.withLock { count += 1 }
        return try inner.values(refs: refs)
    }
    func put(_ secrets: [String: String]) throws(ConfigError) { try inner.put(secrets) }
    func prune(keeping refs: Set<String>) throws(ConfigError) { try inner.prune(keeping: refs) }
}

/// Found by review: a pull of every key (share mode `all`) read and parsed the secrets file once per secret —
/// N secrets × the file's size, on the config queue every device shares.
@Suite("secrets of an offer: read together")
struct SecretBatchTests {
    @Test("an offer of 200 secrets reads the secrets file once, and resolves every value")
    func offerReadsOnce() throws {
        let root = "/tmp/sbc-secrets-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = Home(config: root + "/config", state: root + "/state", runtime: root + "/run")
        let backend = CountingBackend(FileSecretBackend(path: home.config + "/secrets.json"))
        let store = try ConfigStore(home: home, device: device(7), secrets: backend, now: { 1_700_000_000_000 })
        try store.update { tx throws(ConfigError) in
            for n in 0..<200 { _ = try tx.set("api.key\(n)", .string("secret-\(n)"), secret: true) }
            _ = try tx.set("ui.theme", .string("dark"), secret: nil)
        }
        backend.reset()
        let updates = try store.read().offer(keys: nil, includeSecrets: true)
        #expect(backend.reads == 1)
        #expect(updates.count == 201)
        let secrets = updates.compactMap { u -> String? in if case .secret(let s) = u.body { return s } else { return nil } }
        #expect(Set(secrets) == Set((0..<200).map { "secret-\($0)" }))
        // Named keys alike, and a record whose secret is gone is still a clear error.
        backend.reset()
        #expect(try store.read().offer(keys: ["api.key3", "api.key4", "ui.theme"], includeSecrets: true).count == 3)
        #expect(backend.reads == 1)
        try backend.inner.prune(keeping: [])
        #expect(throws: ConfigError.self) { try store.read().offer(keys: ["api.key3"], includeSecrets: true) }
    }
}

/// Found by review: the document is the commit point, yet a failed outbox write after it threw, and a peer whose
/// batch had just been applied was told `internal` ("nothing was applied"). The outbox write is made to fail by a
/// non-empty directory where its file goes (root ignores permission bits, so a read-only directory would not).
@Suite("config commit: after the commit point")
struct CommitPointTests {
    @Test("an outbox that cannot be written after the document was replaced is a warning; the change stands")
    func outboxFailureAfterCommit() throws {
        let t = try TestStore("commit-point", device: device(9))
        defer { t.remove() }
        try t.set("ui.theme", .string("light"))
        let outbox = t.home.state + "/config-outbox.json"
        try t.store.update { tx throws(ConfigError) in
            _ = try tx.set("ui.theme", .string("dark"), secret: nil)
            tx.outbox.stage(device: device(3), kind: .pull, keys: nil, staged: 0) { "s-1" }
            block(outbox)
        }
        unblock(outbox)
        #expect(try t.value("ui.theme") == "\"dark\"")
        // With the document unchanged, the same failure is an error: nothing happened.
        #expect(throws: ConfigError.self) {
            try t.store.update { tx throws(ConfigError) in
                tx.outbox.stage(device: device(4), kind: .pull, keys: nil, staged: 0) { "s-2" }
                block(outbox)
            }
        }
        unblock(outbox)
        #expect(try t.store.read().outbox.items.isEmpty)
    }

    func block(_ path: String) {
        unlink(path)
        mkdir(path, 0o700)
        close(open(path + "/keep", O_CREAT | O_WRONLY, 0o600))
    }

    func unblock(_ path: String) {
        unlink(path + "/keep")
        rmdir(path)
    }
}
