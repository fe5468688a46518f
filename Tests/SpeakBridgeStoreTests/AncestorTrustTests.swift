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
        // Group-writable is the same when the group is shared (here: one that holds no one, as root can set it).
        if geteuid() == 0, let users = getgrnam("users") ?? getgrnam("nogroup") {
            #expect(chown(shared, 0, users.pointee.gr_gid) == 0 && chmod(shared, 0o770) == 0)
            #expect(throws: StoreError.self) { try home(shared + "/alice/sb").prepare() }
        }
    }

    /// A user-private group (Fedora gives every user one, and a umask of 002, so a shell's directories are 0775):
    /// group-writable, but the group holds no one else. Here root's group, when root is its only account.
    @Test(.enabled(if: geteuid() == 0 && AncestorTrustTests.rootGroupHoldsOnlyRoot(),
                   "needs root, and a group 0 whose only account is root"))
    func aGroupWritableDirectoryOfTheOwnersOwnGroupIsFine() throws {
        defer { cleanup() }
        let own = base + "/own"
        #expect(mkdir(own, 0o700) == 0 && chown(own, 0, 0) == 0 && chmod(own, 0o775) == 0)
        try home(own + "/sb").prepare()
        #expect(PrivatePath.isUserPrivateGroup(0, of: 0))
        #expect(!PrivatePath.isUserPrivateGroup(0, of: 65534), "root's group is not nobody's")
    }

    /// What the test expects, read from the password and group files directly (not through the code under test).
    static func rootGroupHoldsOnlyRoot() -> Bool {
        guard let passwd = try? String(contentsOfFile: "/etc/passwd", encoding: .utf8),
              let groups = try? String(contentsOfFile: "/etc/group", encoding: .utf8) else { return false }
        var primary: [String] = []
        for line in passwd.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            if fields.count > 3 && fields[3] == "0" { primary.append(String(fields[0])) }
        }
        var listed: [String] = []
        for line in groups.split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            if fields.count > 3 && fields[2] == "0" {
                for member in fields[3].split(separator: ",") { listed.append(String(member)) }
            }
        }
        return primary == ["root"] && listed.allSatisfy { $0 == "root" }
    }

    /// The rule lives in `PrivatePath.prepareDirectory`, so every private directory gets it, not only a home's:
    /// the transcript sink's directory (a path the user names) goes through the same call.
    @Test func anyPrivateDirectoryBelowADirectoryOthersCanWriteIsRefused() throws {
        defer { cleanup() }
        let shared = base + "/drop"
        #expect(mkdir(shared, 0o700) == 0 && chmod(shared, 0o777) == 0)
        #expect(throws: StoreError.self) { try PrivatePath.prepareDirectory(shared + "/transcripts") }
        #expect(access(shared + "/transcripts", F_OK) != 0, "nothing was created below it")
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

    /// One of our directories is itself a link (a dotfiles checkout): the directories above where it leads are
    /// judged like those above a plain one. Before, only the link's own parents were, and a team-writable
    /// directory above the target let a teammate move our directory away and back (a key or pairings rolled back).
    @Test func aDirectoryThatIsASymlinkIsJudgedByTheDirectoriesAboveItsTarget() throws {
        defer { cleanup() }
        let open = base + "/dots"
        #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
        #expect(mkdir(open + "/speakbridge", 0o700) == 0)
        let root = base + "/home"
        #expect(mkdir(root, 0o700) == 0)
        #expect(symlink(open + "/speakbridge", root + "/config") == 0)
        do {
            try home(root).prepare()
            Issue.record("a config directory linked below a world-writable directory was accepted")
        } catch {
            #expect(error.description.contains("\(open) is writable by other users (mode 777)"), "\(error)")
        }
        #expect(chmod(open, 0o700) == 0)
        try home(root).prepare()
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
