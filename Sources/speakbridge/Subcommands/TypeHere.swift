import ArgumentParser
import SpeakBridgeControl
import SpeakBridgeSupport

/// `speakbridge type --here`: the typing sink holds a session's text while another window has the focus; this
/// sends held and later text of every session to the window focused now.
struct TypeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "type",
        abstract: "Type held and future dictation of every session into the window that has the focus now.",
        discussion: """
            Each dictation session otherwise types only into the window that had the focus at its first chunk \
            (X11, sway): text for it is held while another window is focused.
            """)

    @OptionGroup var homeOptions: HomeOptions

    @Flag(name: .long, help: "Adopt the window focused now (the only action so far; required).")
    var here = false

    func validate() throws {
        guard here else { throw ValidationError("say `speakbridge type --here`") }
    }

    func run() throws {
        let reply: TypeHereReply
        do throws(ControlError) {
            reply = try ControlClient.ask(.typeHere, home: homeOptions.resolved)
        } catch {
            throw CLIError(error.message, hint: error.hint)
        }
        for target in reply.targets { Console.info(target) }
    }
}
