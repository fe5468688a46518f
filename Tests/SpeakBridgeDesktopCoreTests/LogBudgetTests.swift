import Testing
import SpeakBridgeSupport

/// The one budget for lines someone else decides the number of (LogThrottle, the control socket's refusals, the
/// config handler's lines per device).
@Suite struct LogBudgetTests {
    @Test func aWindowPerKeyCountsWhatItHid() {
        var budget = LogBudget<String>(interval: 10, burst: 2)
        #expect(budget.admit("a", now: 100) == 0)
        #expect(budget.admit("a", now: 101) == 0)
        #expect(budget.admit("a", now: 102) == nil)
        #expect(budget.admit("b", now: 103) == 0, "another key has its own window")
        #expect(budget.admit("a", now: 104) == nil)
        #expect(budget.deadline == 110)
        // The next line after the window says how many were hidden.
        #expect(budget.admit("a", now: 110) == 2)
        #expect(budget.deadline == nil)
    }

    @Test func flushSaysTheCountWhenNoLineComes() {
        var budget = LogBudget<Int>(interval: 10, burst: 1)
        #expect(budget.flush(now: 0).isEmpty)
        _ = budget.admit(1, now: 0)
        _ = budget.admit(1, now: 1)
        _ = budget.admit(2, now: 3)
        _ = budget.admit(2, now: 4)
        _ = budget.admit(2, now: 5)
        #expect(budget.flush(now: 9.9).isEmpty)
        #expect(budget.flush(now: 13).map { [$0.key, $0.hidden] } == [[1, 1], [2, 2]])
        #expect(budget.deadline == nil)
        #expect(budget.admit(1, now: 14) == 0, "said by the flush, not again")
    }

    @Test func aClockThatGoesBackEndsTheWindow() {
        var budget = LogBudget<Int>(interval: 10, burst: 1)
        _ = budget.admit(0, now: 50)
        #expect(budget.admit(0, now: 51) == nil)
        #expect(budget.admit(0, now: 40) == 1)
    }
}
