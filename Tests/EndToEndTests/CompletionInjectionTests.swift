#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SpeakBridgeCrypto
import SpeakBridgeStore
import Testing

/// Shell completion offers paired devices' names; a name is chosen by the peer (a hostile desktop names itself at
/// pairing, a phone names itself on the desktop). bash's `compgen -W` expands every candidate, so a name such as
/// `$(touch FILE)` ran as a command at TAB. The real generated bash script, the real binary, a real bash.
@Suite("End to end: shell completion never runs a peer's name", .serialized)
struct CompletionInjectionTests {
    @Test("a peer named like a command substitution is not offered, and completing runs nothing")
    func hostileNamesAreNotOffered() throws {
        let home = Harness.tempDir("completion")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let marker = home + "/MARK"
        let store = try PeerStore(home: Home.resolve(override: home))
        let names = ["$(touch \(marker))", "`touch \(marker)`", "desk; touch \(marker)", "pixel", "Grüße-phone", "Pixel 7",
                     "-rf", "*"]
        for name in names {
            try store.upsert(Peer(name: name, publicKey: X25519PrivateKey().publicKey,
                                  psk: SymmetricKey.random(), role: .desktop))
        }
        let bin = Harness.binary
        let script = """
        source <("$1" --generate-completion-script bash)
        COMP_WORDS=("$1" send --home "$2" --to "")
        COMP_CWORD=5
        COMP_LINE="${COMP_WORDS[*]}"
        COMP_POINT=${#COMP_LINE}
        _speakbridge "$1" "" --to
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script, "bash", bin, home]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let offered = Set(String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init))
        #expect(access(marker, F_OK) != 0, "completing ran a peer's name as a command")
        #expect(offered.contains("pixel") && offered.contains("Grüße-phone") && offered.contains("Pixel 7"), "\(offered)")
        for name in names where !["pixel", "Grüße-phone", "Pixel 7"].contains(name) {
            #expect(!offered.contains(name), "offered \(name)")
        }
        // Every device stays reachable by its ID.
        #expect(offered.filter { $0.count == 19 && $0.filter { $0 == "-" }.count == 3 }.count == names.count, "\(offered)")
    }
}
