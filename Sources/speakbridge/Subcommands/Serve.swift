import ArgumentParser
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import SpeakBridgeConfig
import SpeakBridgeControl
import SpeakBridgeDaemon
import SpeakBridgeProtocol
import SpeakBridgeSinks
import SpeakBridgeStore
import SpeakBridgeSupport

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the desktop daemon: receive dictation and write it to the sinks.",
        discussion: """
        Sinks: stdout (default), fifo:PATH, jsonl:PATH, transcript:DIR, clipboard, clipboard:primary, type, \
        type:enter. Several may be given. \
        With no paired device yet, a pairing QR and code are printed on stderr at start when stderr is a terminal \
        (otherwise, e.g. under systemd, only how to get one: `speakbridge pair`).
        """)

    @OptionGroup var homeOptions: HomeOptions

    @Option(name: .long, help: ArgumentHelp("Where to listen (port 0 = any free port).", valueName: "HOST:PORT"))
    var listen: String = "0.0.0.0:\(SpeakBridgeProtocol.defaultPort)"

    @Option(name: .long, help: ArgumentHelp("Where received text goes (repeatable).", valueName: "SINK"),
            completion: Completions.sinks)
    var sink: [String] = []

    @Flag(name: .long, help: "Do not sanitize control characters and escape sequences from peers.")
    var raw = false

    @Option(name: .long, help: ArgumentHelp(
        "Name announced over mDNS and shown to paired devices, 1 to 63 bytes of UTF-8 (default: SpeakBridge and the first four characters of the device ID).",
        valueName: "NAME"))
    var name: String?

    @Flag(name: .customLong("no-mdns"), help: "Do not publish this desktop over mDNS.")
    var noMDNS = false

    @Option(name: .long, help: ArgumentHelp("How long a pairing code stays valid.", valueName: "SECONDS"))
    var pairingLifetime: Int = SpeakBridgeProtocol.pairingCodeLifetime

    @OptionGroup var webOptions: WebServeOptions

    func validate() throws {
        guard (1...3_600).contains(pairingLifetime) else {
            throw ValidationError("--pairing-lifetime must be between 1 and 3600 seconds")
        }
        if let name, let problem = DaemonOptions.nameProblem(name) {
            throw ValidationError("--name: \(problem)")
        }
    }

    func run() throws {
        let home = homeOptions.resolved
        let (host, port) = try parseHostPort(listen, defaultHost: "0.0.0.0")
        let specs: [SinkSpec]
        do {
            specs = try (sink.isEmpty ? ["stdout"] : sink).map { try SinkSpec(parsing: $0) }
        } catch {
            throw CLIError("\(error)", hint: "valid sinks: \(SinkSpec.validForms)")
        }
        // SIGINT and SIGTERM are blocked here, before the daemon starts any thread, so every thread inherits the
        // block and the signals stay pending until `sigwait` below takes them: a graceful stop however the
        // signal is sent. Children (clipboard and typing tools) are spawned with a clean mask.
        // Hand-written, not swift-service-lifecycle: its DispatchSource signals do fire here (re-measured with
        // this daemon: 6 of 6 SIGTERM stops), but it needs an async command and a Service wrapper around the
        // synchronous Daemon, and has no hard exit for a stop stuck in avahi; these lines need neither.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        let daemon: Daemon
        do {
            var options = DaemonOptions(home: home, host: host, port: port, sinks: specs, raw: raw,
                                        name: name, mdns: !noMDNS, pairingLifetime: pairingLifetime)
            options.configHandler = try ConfigPeerHandler(home: home)
            options.web = webOptions.resolved
            daemon = try Daemon(options: options)
        } catch let error as ConfigError {
            throw CLIError(error.message, hint: error.hint)
        } catch let error as StoreError {
            throw CLIError(error)
        } catch let error as SinkError {
            throw CLIError(error.message, hint: error.hint)
        } catch {
            throw CLIError("cannot start: \(error)",
                           hint: "is another program using port \(port)? choose one with --listen HOST:PORT")
        }
        Console.info("desktop \(daemon.deviceID) listening on \(host):\(daemon.port); sinks: \(specs.map(\.description).joined(separator: ", "))")
        if try PeerStore(home: home).all.allSatisfy({ $0.role != .client }) {
            // The code carries the 256-bit pairing secret: it is shown on a terminal only. When stderr is a file
            // or a pipe (systemd sends it to the journal, which other users may be allowed to read) only the way
            // to get one is printed.
            let pairCommand = "speakbridge pair" + (homeOptions.home.map { " --home '\($0)'" } ?? "")
            if isatty(STDERR_FILENO) == 1 {
                Console.info("no paired device yet; pair one with this code:")
                // The mDNS outcome is logged once it is known: wait for it (briefly) so that its line comes
                // before the QR and does not push the QR's top off an 80×24 screen.
                daemon.waitForDiscoveryOutcome(timeout: 3)
                PairCodePrinter.show(home: home, toStderr: true, pairCommand: pairCommand)
            } else {
                Console.info("no paired device yet; the pairing code is shown on a terminal only, never in a log")
                Console.info("hint: to pair a device, run `\(pairCommand)` in a terminal on this machine"
                             + " (`\(pairCommand) --web` for a phone's browser, no app needed)")
            }
        }
        SystemdNotify.send("READY=1\nSTATUS=listening on \(host):\(daemon.port)")
        var received: Int32 = 0
        while sigwait(&stopSignals, &received) != 0 {}
        Console.info("stopping (\(received == SIGINT ? "SIGINT" : "SIGTERM"))")
        SystemdNotify.send("STOPPING=1")
        // Everything that matters is durable before the mDNS withdrawal starts (see Daemon.stop); if that
        // withdrawal stalls (avahi-daemon not answering over D-Bus), leave anyway after 3 s.
        // _exit, not exit: atexit handlers of the C libraries could wait on the very thread that is stuck.
        // Nothing is lost by skipping them: every write this process makes is a plain write(2).
        Threads.start {
            Threads.sleep(seconds: 3)
            Console.warning("withdrawing the mDNS record took too long; exiting without it")
            _exit(0)
        }
        daemon.stop()
        _exit(0)
    }
}

/// Asks the running daemon for a code and shows it (PairingDisplay: QR, code once, one instruction line).
enum PairCodePrinter {
    static func show(home: Home, toStderr: Bool, pairCommand: String = "speakbridge pair") {
        do throws(ControlError) {
            let reply = try ControlClient.ask(.pair(web: false), home: home, as: PairReply.self)
            PairingDisplay.show(code: reply.code, lifetime: reply.lifetime, toStderr: toStderr, pairCommand: pairCommand)
        } catch {
            Console.error(error.message, hint: error.hint)
        }
    }
}
