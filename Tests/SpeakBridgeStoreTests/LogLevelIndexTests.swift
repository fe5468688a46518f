import Logging
import Testing
@testable import SpeakBridgeSupport

/// `SpeakBridgeLogHandler` keeps the program's level as an index without reading `Logger.Level.allCases` (an array
/// built per read): its own mapping must be swift-log's order, both ways, and `debugEnabled` must be the test
/// `Logger.debug` makes.
@Suite struct LogLevelIndexTests {
    @Test func theIndexIsSwiftLogsOrder() {
        for (position, level) in Logger.Level.allCases.enumerated() {
            #expect(SpeakBridgeLogHandler.index(of: level) == position)
            #expect(SpeakBridgeLogHandler.level(at: position) == level)
        }
        #expect(SpeakBridgeLogHandler.level(at: -1) == .trace)
        #expect(SpeakBridgeLogHandler.level(at: 99) == .critical)
    }

    @Test func debugIsEnabledExactlyWhenTheLevelLetsDebugThrough() {
        for level in Logger.Level.allCases {
            let threshold = SpeakBridgeLogHandler.index(of: level)
            #expect((threshold <= SpeakBridgeLogHandler.index(of: .debug)) == (level <= .debug))
        }
    }
}
