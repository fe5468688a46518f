import Logging
import Testing
@testable import SpeakBridgeStore
import SpeakBridgeSupport

/// The lines `SpeakBridgeLogHandler` writes, per style (the real binary's stderr is checked in EndToEndTests).
@Suite struct LogFormatTests {
    static let plain = SpeakBridgeLogHandler.Style(journal: false, colour: false)
    static let journal = SpeakBridgeLogHandler.Style(journal: true, colour: false)
    static let terminal = SpeakBridgeLogHandler.Style(journal: false, colour: true)

    func line(_ level: Logger.Level, _ message: String, metadata: Logger.Metadata = [:], hint: String? = nil,
              _ style: SpeakBridgeLogHandler.Style) -> String {
        SpeakBridgeLogHandler.format(level: level, message: message, metadata: metadata, hint: hint, style: style)
    }

    @Test func plainLinesAreTheFamiliarOnes() {
        #expect(line(.info, "listening", Self.plain) == "speakbridge: listening\n")
        #expect(line(.warning, "w", Self.plain) == "speakbridge: warning: w\n")
        #expect(line(.error, "e", hint: "h", Self.plain) == "speakbridge: error: e\nspeakbridge: hint: h\n")
        #expect(line(.debug, "d", metadata: ["k": "v"], Self.plain) == "speakbridge: debug: d (k=v)\n")
    }

    @Test func journalLinesCarryTheSdDaemonPriority() {
        #expect(line(.error, "e", hint: "h", Self.journal) == "<3>speakbridge: error: e\n<3>speakbridge: hint: h\n")
        #expect(line(.warning, "w", Self.journal) == "<4>speakbridge: warning: w\n")
        #expect(line(.info, "i", Self.journal) == "<6>speakbridge: i\n")
        #expect(line(.debug, "d", Self.journal) == "<7>speakbridge: debug: d\n")
    }

    @Test func colourOnlyOnTheLabelAndOnlyOnATerminal() {
        #expect(line(.error, "e", Self.terminal) == "speakbridge: \u{1B}[1;31merror:\u{1B}[0m e\n")
        #expect(!line(.error, "e", hint: "h", Self.plain).contains("\u{1B}"))
    }

    /// A peer-chosen part can neither start a forged line nor smuggle an escape sequence, in the message, the
    /// hint or metadata.
    @Test func everyPartIsEscaped() {
        let forged = "x\nspeakbridge: error: forged\u{1B}]52;c;AAAA\u{07}"
        let text = line(.info, forged, metadata: ["name": "\(forged)"], hint: forged, Self.journal)
        #expect(text.split(separator: "\n").count == 2)
        #expect(!text.contains("\u{1B}") && !text.contains("\u{07}"))
        #expect(text.hasPrefix(#"<6>speakbridge: x\nspeakbridge: error: forged\x1b]52;c;AAAA\x07 (name=x\n"#))
    }
}
