import Logging
import Testing
@testable import SpeakBridgeStore

/// The lines `SpeakBridgeLogHandler` writes, per style (the real binary's stderr is checked in EndToEndTests).
@Suite struct LogFormatTests {
    static let plain = SpeakBridgeLogHandler.Style(journal: false, colour: false)
    static let journal = SpeakBridgeLogHandler.Style(journal: true, colour: false)
    static let terminal = SpeakBridgeLogHandler.Style(journal: false, colour: true)

    @Test func plainLinesAreTheFamiliarOnes() {
        #expect(SpeakBridgeLogHandler.format(level: .info, message: "listening", metadata: [:], hint: nil, style: Self.plain)
            == "speakbridge: listening\n")
        #expect(SpeakBridgeLogHandler.format(level: .warning, message: "w", metadata: [:], hint: nil, style: Self.plain)
            == "speakbridge: warning: w\n")
        #expect(SpeakBridgeLogHandler.format(level: .error, message: "e", metadata: [:], hint: "h", style: Self.plain)
            == "speakbridge: error: e\nspeakbridge: hint: h\n")
        #expect(SpeakBridgeLogHandler.format(level: .debug, message: "d", metadata: ["k": "v"], hint: nil, style: Self.plain)
            == "speakbridge: debug: d (k=v)\n")
    }

    @Test func journalLinesCarryTheSdDaemonPriority() {
        #expect(SpeakBridgeLogHandler.format(level: .error, message: "e", metadata: [:], hint: "h", style: Self.journal)
            == "<3>speakbridge: error: e\n<3>speakbridge: hint: h\n")
        #expect(SpeakBridgeLogHandler.format(level: .warning, message: "w", metadata: [:], hint: nil, style: Self.journal)
            == "<4>speakbridge: warning: w\n")
        #expect(SpeakBridgeLogHandler.format(level: .info, message: "i", metadata: [:], hint: nil, style: Self.journal)
            == "<6>speakbridge: i\n")
        #expect(SpeakBridgeLogHandler.format(level: .debug, message: "d", metadata: [:], hint: nil, style: Self.journal)
            == "<7>speakbridge: debug: d\n")
    }

    @Test func colourOnlyOnTheLabelAndOnlyOnATerminal() {
        let line = SpeakBridgeLogHandler.format(level: .error, message: "e", metadata: [:], hint: nil, style: Self.terminal)
        #expect(line == "speakbridge: \u{1B}[1;31merror:\u{1B}[0m e\n")
        #expect(!SpeakBridgeLogHandler.format(level: .error, message: "e", metadata: [:], hint: "h", style: Self.plain)
            .contains("\u{1B}"))
    }

    /// A peer-chosen part can neither start a forged line nor smuggle an escape sequence, in the message, the
    /// hint or metadata.
    @Test func everyPartIsEscaped() {
        let forged = "x\nspeakbridge: error: forged\u{1B}]52;c;AAAA\u{07}"
        let text = SpeakBridgeLogHandler.format(level: .info, message: forged, metadata: ["name": "\(forged)"],
                                                hint: forged, style: Self.journal)
        #expect(text.split(separator: "\n").count == 2)
        #expect(!text.contains("\u{1B}") && !text.contains("\u{07}"))
        #expect(text.hasPrefix(#"<6>speakbridge: x\nspeakbridge: error: forged\x1b]52;c;AAAA\x07 (name=x\n"#))
    }
}
