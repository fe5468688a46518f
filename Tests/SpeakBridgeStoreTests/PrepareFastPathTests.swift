#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeStore

/// `PrivatePath.prepareDirectory` only checks a directory that already exists (no mkdir of every prefix), and the
/// CLI resolves its home from getenv without a dictionary (`Home.resolve(override:variable:)`): both must decide
/// exactly as before — the same directories created, the same refusals, the same paths.
@Suite("Start-up fast paths of Home", .serialized)
struct PrepareFastPathTests {
    let root = "/tmp/sb-prep-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    var home: Home { Home.resolve(override: root, environment: [:]) }

    func cleanup() { try? FileManager.default.removeItem(atPath: root) }

    func refusal(_ body: () throws -> Void) -> String? {
        do { try body() } catch let error as StoreError { return error.description } catch { return "\(error)" }
        return nil
    }

    @Test func anExistingPrivateHomeIsAcceptedAndAMissingPartCreated() throws {
        defer { cleanup() }
        try home.prepare()
        rmdir(home.outboxDirectory)
        try home.prepare()  // everything but the outbox exists: the fast path for those, creation for it
        #expect(FileIO.mode(home.outboxDirectory) == 0o700)
        try home.prepare()  // all exist
        for dir in [root, home.config, home.state, home.runtime, home.outboxDirectory] {
            #expect(FileIO.mode(dir) == 0o700, "\(dir)")
        }
    }

    @Test func anExistingDirectoryOthersCanWriteIsStillRefused() throws {
        defer { cleanup() }
        try home.prepare()
        chmod(home.config, 0o777)
        let message = refusal { try home.prepare() }
        #expect(message?.contains("\(home.config) is writable by other users") == true, "\(message ?? "accepted")")
    }

    @Test func aFileInPlaceOfADirectoryIsStillRefused() throws {
        defer { cleanup() }
        try home.prepare()
        rmdir(home.outboxDirectory)
        let fd = open(home.outboxDirectory, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        close(fd)
        let message = refusal { try home.prepare() }
        #expect(message?.contains("is not a directory") == true, "\(message ?? "accepted")")
    }

    @Test func aSymlinkToOurOwnDirectoryIsJudgedAsBefore() throws {
        defer { cleanup(); try? FileManager.default.removeItem(atPath: root + "-target") }
        try home.prepare()
        let target = root + "-target"
        #expect(mkdir(target, 0o700) == 0)
        rmdir(home.outboxDirectory)
        #expect(symlink(target, home.outboxDirectory) == 0)
        #expect(refusal { try home.prepare() } == nil)  // ours, followed to a private directory: accepted as before
        chmod(target, 0o777)
        #expect(refusal { try home.prepare() }?.contains("is writable by other users") == true)
        unlink(home.outboxDirectory)
        #expect(symlink(root + "-nowhere", home.outboxDirectory) == 0)  // dangling: mkdir gave EEXIST, stat fails
        #expect(refusal { try home.prepare() } != nil)
    }

    @Test func resolvingThroughALookupGivesTheSameHomeAsTheDictionary() {
        let vectors: [[String: String]] = [
            [:],
            ["HOME": "/home/u"],
            ["SPEAKBRIDGE_HOME": "/x/y", "HOME": "/home/u"],
            ["SPEAKBRIDGE_HOME": "", "HOME": "/home/u", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"],
            ["HOME": "/home/u", "XDG_CONFIG_HOME": "relative", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/r"],
            ["HOME": "/home/u", "XDG_RUNTIME_DIR": "not-absolute"],
        ]
        for environment in vectors {
            for override in [nil, "/o"] as [String?] {
                let a = Home.resolve(override: override, environment: environment, systemRuntime: "/nonexistent/run")
                let b = Home.resolve(override: override, variable: { environment[$0] }, systemRuntime: "/nonexistent/run")
                #expect(a == b, "\(environment) \(override ?? "nil")")
            }
        }
    }
}
