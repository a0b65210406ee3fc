import LibraryDomain
import Testing

@testable import LibraryAPI

/// `/healthz`'s rules, check by check with explicit times: no database, no sleep.
@Suite struct HealthProbeStateTests {
    static let second: UInt64 = 1_000_000_000
    let ignore: @Sendable (Result<Void, StoreError>) -> Void = { _ in }

    func succeeded(_ answer: Result<Void, StoreError>?) -> Bool {
        if case .success? = answer { true } else { false }
    }

    func failed(_ answer: Result<Void, StoreError>?) -> Bool {
        if case .failure? = answer { true } else { false }
    }

    @Test func theFirstCheckWaitsForTheFirstProbe_AndLaterOnesShareIt() {
        var state = HealthProbeState()
        let first = state.check(now: 0, ignore)
        #expect(first.answer == nil && first.start)
        let second = state.check(now: Self.second, ignore)
        #expect(second.answer == nil && !second.start)
        #expect(state.finish(.success(()), now: 2 * Self.second).count == 2)
        #expect(state.started == 1)
    }

    @Test func aRecentSuccessAnswersAtOnce_WhileTheNextProbeRuns_ForSixtySeconds() {
        var state = HealthProbeState()
        _ = state.check(now: 0, ignore)
        _ = state.finish(.success(()), now: 0)
        let during = state.check(now: 10 * Self.second, ignore)  // starts a probe, answers from the last
        #expect(succeeded(during.answer) && during.start)
        let stillFresh = state.check(now: 29 * Self.second, ignore)
        #expect(succeeded(stillFresh.answer) && !stillFresh.start)
        _ = state.finish(.success(()), now: 29 * Self.second)
        let later = state.check(now: 88 * Self.second, ignore)  // 59 s after the last success
        #expect(succeeded(later.answer))
        let stale = state.check(now: 90 * Self.second, ignore)  // 61 s: the probe under way must answer
        #expect(stale.answer == nil && !stale.start)
    }

    @Test func aProbeStuckForThirtySeconds_IsAFailure_EvenAfterARecentSuccess() {
        var state = HealthProbeState()
        _ = state.check(now: 0, ignore)
        _ = state.finish(.success(()), now: 0)
        _ = state.check(now: Self.second, ignore)  // the next probe starts, and never answers
        #expect(succeeded(state.check(now: 30 * Self.second, ignore).answer))
        let stuck = state.check(now: 31 * Self.second, ignore)
        #expect(failed(stuck.answer) && !stuck.start)
    }

    @Test func afterAFailure_ChecksWaitForTheNextProbe() {
        var state = HealthProbeState()
        _ = state.check(now: 0, ignore)
        _ = state.finish(.failure(StoreError(.unavailable)), now: Self.second)
        let next = state.check(now: 2 * Self.second, ignore)
        #expect(next.answer == nil && next.start)
        #expect(state.finish(.success(()), now: 3 * Self.second).count == 1)
        #expect(succeeded(state.check(now: 4 * Self.second, ignore).answer))
    }
}
