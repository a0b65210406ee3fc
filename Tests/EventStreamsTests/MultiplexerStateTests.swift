import Testing

@testable import EventStreams

/// A multiplexed stream's rules, event by event with explicit times: no socket, no hub, no sleep.
@Suite struct MultiplexerStateTests {
    typealias State = MultiplexerState

    /// A stream of `watches` watches, opened and settled at change `seq`.
    static func open(watches: Int = 2, settledAt seq: Int = 5) -> State {
        var state = State(watches: watches, now: 0)
        for index in 0..<watches {
            #expect(state.answerArrives() == nil)
            let opens = state.answered()
            #expect(opens == (index == watches - 1))
        }
        for _ in 0..<watches { state.settled(first: true, through: seq) }
        return state
    }

    @Test func `the stream opens when the last of its watches answers`() {
        var state = State(watches: 3, now: 0)
        let first = state.answered()
        let second = state.answered()
        #expect(!first && !second && state.phase == .opening(outstanding: 1))
        let third = state.answered()
        #expect(third && state.isOpen)
    }

    @Test func `a refused stream drops the answers that come after, and reports nothing more`() {
        var state = State(watches: 3, now: 0)
        _ = state.answered()
        state.refuse()
        let report = state.answerArrives()
        #expect(report == false && !state.isLive)
    }

    @Test func `a stream that ended before it opened answers the next watch's request with a 503, once`() {
        var state = State(watches: 2, now: 0)
        let ended = state.end()
        #expect(ended)
        let first = state.answerArrives()
        let second = state.answerArrives()
        #expect(first == true && second == false)
    }

    @Test func `a frame waits until every watch settled, then for the live side to reach the newest change`() {
        var state = State(watches: 2, now: 0)
        _ = state.answered()
        _ = state.answered()
        state.settled(first: true, through: 7)
        var action = state.flush(paging: false, position: 9, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .none)  // one watch has not settled
        state.settled(first: true, through: 12)
        state.settled(first: false, through: 3)  // a later settling moves nothing back
        #expect(state.floor == 12)
        action = state.flush(paging: false, position: 9, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .waitForApplied(through: 12))
        action = state.flush(paging: false, position: 10, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .waiting)  // one wait at a time
        state.applied()
        action = state.flush(paging: false, position: 12, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .write)
    }

    @Test func `a full connection makes frames wait for one drain, and nothing is written while pages are`() {
        var state = Self.open()
        var action = state.flush(paging: false, position: 5, hasWork: true, backlog: 32, maxBacklog: 32)
        #expect(action == .waitForDrain)
        action = state.flush(paging: false, position: 5, hasWork: true, backlog: 40, maxBacklog: 32)
        #expect(action == .waiting)
        state.drained()
        action = state.flush(paging: true, position: 5, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .none)
        action = state.flush(paging: false, position: 5, hasWork: false, backlog: 0, maxBacklog: 32)
        #expect(action == .none)
        action = state.flush(paging: false, position: 5, hasWork: true, backlog: 31, maxBacklog: 32)
        #expect(action == .write)
    }

    @Test func `a watch added to an open stream holds frames back until it settles`() {
        var state = Self.open()
        state.watchAdded()
        var action = state.flush(paging: false, position: 5, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .none)
        state.settled(first: true, through: 6)
        action = state.flush(paging: false, position: 6, hasWork: true, backlog: 0, maxBacklog: 32)
        #expect(action == .write)
    }

    @Test func `one flush is scheduled at a time`() {
        var state = Self.open()
        let first = state.flushWanted()
        let second = state.flushWanted()
        #expect(first && !second)
        state.flushRuns()
        let third = state.flushWanted()
        #expect(third)
    }

    @Test func `a keep-alive goes out after a second of silence, never inside a frame or behind queued writes`() {
        var state = Self.open()
        var due = state.keepAliveDue(now: 900_000_000, frameOpen: false, backlog: 0)
        #expect(!due)
        due = state.keepAliveDue(now: 1_100_000_000, frameOpen: true, backlog: 0)
        #expect(!due)
        due = state.keepAliveDue(now: 1_100_000_000, frameOpen: false, backlog: 1)
        #expect(!due)
        due = state.keepAliveDue(now: 1_100_000_000, frameOpen: false, backlog: 0)
        #expect(due)
        due = state.keepAliveDue(now: 1_500_000_000, frameOpen: false, backlog: 0)
        #expect(!due)  // the second runs from the last one
    }

    @Test func `an ended stream writes nothing more and ends once`() {
        var state = Self.open()
        let ended = state.end()
        let again = state.end()
        #expect(ended && !again && state.phase == .ended(opened: true))
        let action = state.flush(paging: false, position: 9, hasWork: true, backlog: 0, maxBacklog: 32)
        let due = state.keepAliveDue(now: 9_000_000_000, frameOpen: false, backlog: 0)
        #expect(action == .none && !due)
    }

    @Test func `a drain nobody waited for traps`() async {
        await #expect(processExitsWith: .failure) {
            var state = MultiplexerState(watches: 1, now: 0)
            state.drained()
        }
    }

    @Test func `more watches settling than were added traps`() async {
        await #expect(processExitsWith: .failure) {
            var state = MultiplexerState(watches: 1, now: 0)
            state.settled(first: true, through: 1)
            state.settled(first: true, through: 2)
        }
    }

    @Test func `an answer for a stream that is open traps`() async {
        await #expect(processExitsWith: .failure) {
            var state = MultiplexerState(watches: 1, now: 0)
            _ = state.answered()
            _ = state.answered()
        }
    }
}
