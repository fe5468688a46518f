#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import FoundationEssentials
import SpeakBridgeClient
import SpeakBridgeCrypto
import SpeakBridgeProtocol
import SpeakBridgeStore
import SpeakBridgeSupport

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Pair this installation with a desktop, using the code it showed (`speakbridge pair`).")

    @OptionGroup var homeOptions: HomeOptions

    @Argument(help: "The pairing code (SB1:…).") var code: String

    @Option(name: .long, help: "A name for this device, shown on the desktop.")
    var name: String = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "capture"

    @OptionGroup var addressOptions: AddressOptions

    func run() throws {
        let extra = try addressOptions.candidates()
        let home = homeOptions.resolved
        // Lines queued under an earlier pairing with this desktop must not go out first (or at all) once paired
        // again: hold the desktop's outbox lock through the pairing (no `send` can use the journal meanwhile), then
        // move what is queued aside as held (`speakbridge outbox release` / `clear` decide).
        var lockFD: Int32 = -1
        if let desktop = try? PairingCode.parse(code),
           let key = try? X25519PublicKey(rawRepresentation: desktop.publicKey) {
            do {
                lockFD = try OutboxShelf.lock(home: home, desktop: KeySchedule.deviceID(of: key))
            } catch {
                throw CLIError(error.message, hint: "a `speakbridge send` to this desktop is running: stop it before pairing again")
            }
        }
        defer { if lockFD >= 0 { close(lockFD) } }
        let peer: Peer
        do {
            peer = try Joiner.join(home: home, code: code, name: name, extraCandidates: extra)
        } catch {
            throw CLIError(error.message, hint: error.hint, exitCode: error.exitCode)
        }
        Console.info("paired with \"\(peer.name)\" (\(peer.id)); send text with `speakbridge send`")
        do {
            let held = try OutboxShelf.hold(home: home, desktop: peer.id)
            if held > 0 {
                Console.info("\(held) line(s) queued under the earlier pairing with \"\(peer.name)\" are held, not sent: "
                             + "`speakbridge outbox release` sends them, `speakbridge outbox clear --held` drops them")
            }
        } catch {
            throw CLIError("paired, but setting aside the earlier pairing's outbox failed: \(error.message)",
                           hint: error.hint ?? "`speakbridge outbox clear` drops them before the next `send`")
        }
    }
}
