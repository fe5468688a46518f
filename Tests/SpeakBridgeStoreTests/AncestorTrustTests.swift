#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import SpeakBridgeStore

/// The directories above SpeakBridge's own: whoever can write one of them can rename our directory away and put
/// theirs in its place between two starts (a `peers.json` rolled back, a revoked device paired again), so each must
/// be root's or ours and not writable by others unless sticky (as `/tmp` is).
@Suite("Directories above the home", .serialized)
struct AncestorTrustTests {
    let base = "/tmp/sb-ancestors-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    init() { _ = mkdir(base, 0o700) }

    private func cleanup() { try? FileManager.default.removeItem(atPath: base) }

    private func home(_ root: String) -> Home { Home.resolve(override: root, environment: [:]) }

    @Test func aHomeBelowADirectoryOthersCanWriteIsRefused() throws {
        defer { cleanup() }
        let shared = base + "/team"
        #expect(mkdir(shared, 0o700) == 0 && chmod(shared, 0o777) == 0)
        do {
            try home(shared + "/alice/sb").prepare()
            Issue.record("a home under a world-writable, non-sticky directory was accepted")
        } catch {
            #expect(error.description.contains("\(shared) is writable by other users (mode 777)"), "\(error)")
        }
        #expect(access(shared + "/alice", F_OK) != 0, "nothing was created below it")
        // Group-writable is the same.
        #expect(chmod(shared, 0o770) == 0)
        #expect(throws: StoreError.self) { try home(shared + "/alice/sb").prepare() }
    }

    @Test func aStickySharedDirectoryAboveIsFine() throws {
        defer { cleanup() }
        let sticky = base + "/sticky"
        #expect(mkdir(sticky, 0o700) == 0 && chmod(sticky, 0o1777) == 0)
        try home(sticky + "/sb").prepare()
        var info = stat()
        #expect(stat(sticky + "/sb", &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test func aSymlinkAboveIsJudgedByWhereItLeads() throws {
        defer { cleanup() }
        let open = base + "/open"
        #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
        #expect(mkdir(open + "/inner", 0o700) == 0)
        #expect(symlink(open + "/inner", base + "/link") == 0)
        // The link is ours and its own directory is private, but the directory above its target is not.
        #expect(throws: StoreError.self) { try home(base + "/link/sb").prepare() }
        let fine = base + "/fine"
        #expect(mkdir(fine, 0o700) == 0)
        #expect(symlink(fine, base + "/link2") == 0)
        try home(base + "/link2/sb").prepare()
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to make a directory of another user"))
    func aDirectoryAboveOwnedByAnotherUserIsRefused() throws {
        defer { cleanup() }
        let theirs = base + "/theirs"
        #expect(mkdir(theirs, 0o755) == 0 && chown(theirs, 65534, 65534) == 0)
        do {
            try home(theirs + "/sb").prepare()
            Issue.record("a home inside another user's directory was accepted")
        } catch {
            #expect(error.description.contains("belongs to another user (uid 65534)"), "\(error)")
        }
    }
}
