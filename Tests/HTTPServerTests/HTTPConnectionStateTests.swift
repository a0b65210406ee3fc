import Testing

@testable import HTTPServer

/// The connection's rules, driven event by event with explicit times: no socket, no sleep.
@Suite struct HTTPConnectionStateTests {
    typealias State = HTTPConnectionState
    static let timeouts = State.Timeouts(idle: 60_000, request: 10_000, write: 30_000, linger: 2_000)
    static let get = State.Request(isHead: false, keepAlive: true, version: .http1_1)

    /// A connection that answered one request and waits for the next, at `now`.
    static func kept(at now: UInt64) -> State {
        var state = State(now: 0, timeouts: timeouts)
        state.requestReceived(get)
        _ = state.responseArrived()
        let afterSend = state.outputSent(now: now)
        #expect(afterSend == .none)
        let closes = state.needInput(atBoundary: true, now: now)
        #expect(!closes)
        return state
    }

    @Test func `a new connection has the shorter of the request and idle timeouts to send its first request`() {
        let state = State(now: 1_000, timeouts: Self.timeouts)
        #expect(state.deadline == .idle(11_000))
        #expect(state.tick(now: 10_999) == .none)
        #expect(state.tick(now: 11_000) == .close)
    }

    @Test func `a kept-alive connection idles for the idle timeout, and blank lines do not move it`() {
        var state = Self.kept(at: 5_000)
        #expect(state.deadline == .idle(65_000))
        let closes = state.needInput(atBoundary: true, now: 30_000)
        #expect(!closes)  // a blank line arrived
        #expect(state.deadline == .idle(65_000))
        #expect(state.tick(now: 65_000) == .close)
    }

    @Test func `a request that began must arrive whole within the request timeout, however its bytes trickle`() {
        var state = Self.kept(at: 0)
        let closes = state.needInput(atBoundary: false, now: 1_000)
        #expect(!closes)
        #expect(state.deadline == .request(11_000))
        let closes2 = state.needInput(atBoundary: false, now: 9_000)
        #expect(!closes2)  // more bytes, still not whole
        #expect(state.deadline == .request(11_000))
        #expect(state.tick(now: 11_000) == .requestTimedOut)
        // The 408 is answered, our side shuts down, the client's bytes are drained for a moment.
        let refused = state.refuse()
        #expect(refused == State.Request(isHead: false, keepAlive: false, version: .http1_1))
        let response = state.responseArrived()
        #expect(response?.keepAlive == false)
        let afterSend = state.outputSent(now: 11_000)
        #expect(afterSend == .linger)
        #expect(state.phase == .lingering && !state.keepsInput)
        #expect(state.tick(now: 12_999) == .none)
        #expect(state.tick(now: 13_000) == .close)
    }

    @Test func `a refused request after the client's half-close closes without lingering`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.peerEnded()
        let refused = state.refuse()
        #expect(refused != nil)
        _ = state.responseArrived()
        let afterSend = state.outputSent(now: 0)
        #expect(afterSend == .close)
    }

    @Test func `output that waits drops a client only after it took nothing for the write timeout`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        _ = state.responseArrived()
        state.outputBlocked(progressed: false, now: 1_000)
        #expect(state.deadline == .write(31_000))
        state.outputBlocked(progressed: false, now: 20_000)  // nothing taken: the deadline stays
        #expect(state.deadline == .write(31_000))
        state.outputBlocked(progressed: true, now: 20_000)  // some bytes left: it moves on
        #expect(state.deadline == .write(50_000))
        #expect(state.tick(now: 50_000) == .close)
        let afterSend = state.outputSent(now: 40_000)
        #expect(afterSend == .none)
        #expect(state.deadline == .none)
    }

    @Test func `a response keeps the connection only when the request and the server allow it`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(State.Request(isHead: false, keepAlive: false, version: .http1_0))
        let response = state.responseArrived()
        #expect(response?.keepAlive == false)
        let afterSend = state.outputSent(now: 0)
        #expect(afterSend == .close)

        state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        let drained = state.drain(idle: false)
        #expect(drained == .none)  // the request in flight finishes
        let response2 = state.responseArrived()
        #expect(response2?.keepAlive == false)
        let afterSend2 = state.outputSent(now: 0)
        #expect(afterSend2 == .close)
    }

    @Test func `stopping closes an idle connection, ends a stream, and waits for a response in flight`() {
        var idle = Self.kept(at: 0)
        let drained = idle.drain(idle: true)
        #expect(drained == .close)
        var busy = Self.kept(at: 0)
        let drained2 = busy.drain(idle: false)
        #expect(drained2 == .none)  // half a request: it may still complete
        let closes = busy.needInput(atBoundary: true, now: 1)
        #expect(closes)  // nothing more came: close
        var streaming = State(now: 0, timeouts: Self.timeouts)
        streaming.requestReceived(Self.get)
        _ = streaming.streamStarted()
        let drained3 = streaming.drain(idle: false)
        #expect(drained3 == .finishStream)
    }

    @Test func `a stream is chunked on HTTP 1.1 only, ends once, and takes no bytes after its end`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        let started = state.streamStarted()
        #expect(started?.chunked == true && started?.keepAlive == true && started?.finishNow == false)
        #expect(state.streamAccepts() == true)
        let finished = state.finishStream()
        #expect(finished == true)
        let finished2 = state.finishStream()
        #expect(finished2 == nil)
        #expect(state.streamAccepts() == nil)
        let afterSend = state.outputSent(now: 0)
        #expect(afterSend == .close)

        var old = State(now: 0, timeouts: Self.timeouts)
        old.requestReceived(State.Request(isHead: false, keepAlive: true, version: .http1_0))
        let oldStarted = old.streamStarted()
        #expect(oldStarted?.chunked == false)
        let oldFinished = old.finishStream()
        #expect(oldFinished == false)
    }

    @Test func `a stream opened while the server stops ends at once and does not keep the connection`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        _ = state.drain(idle: false)
        let started = state.streamStarted()
        #expect(started?.finishNow == true && started?.keepAlive == false)
    }

    @Test func `what arrives after the connection closed is ignored`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        let closed = state.close()
        #expect(closed)
        let closed2 = state.close()
        #expect(!closed2)
        let response = state.responseArrived()
        #expect(response == nil)
        let started = state.streamStarted()
        #expect(started == nil)
        #expect(state.streamAccepts() == nil)
        let finished = state.finishStream()
        #expect(finished == nil)
        let refused = state.refuse()
        #expect(refused == nil)
    }

    @Test func `a head judged before its body: answered, it closes after the answer; let through, reading resumes`() {
        var state = Self.kept(at: 0)
        let closes = state.needInput(atBoundary: false, now: 100)
        #expect(!closes)
        let saved = state.judgeBeforeBody(Self.get)
        let response = state.responseArrived()
        #expect(response?.keepAlive == false)  // answered: no body is read
        let afterSend = state.outputSent(now: 200)
        #expect(afterSend == .linger)
        #expect(saved == .request(10_100))

        var through = Self.kept(at: 0)
        let closes2 = through.needInput(atBoundary: false, now: 100)
        #expect(!closes2)
        through.readBody(restoring: through.judgeBeforeBody(Self.get))
        #expect(through.phase == .reading && through.afterFlush == .stayOpen && through.deadline == .request(10_100))
    }

    @Test func `input paused at the limit resumes once, with the hang-up it saw`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        let resumed = state.resumeInput()
        #expect(resumed == nil)
        state.inputPaused(hangUp: true)
        let resumed2 = state.resumeInput()
        #expect(resumed2 == true)
        let resumed3 = state.resumeInput()
        #expect(resumed3 == nil)
    }

    @Test func `a half-closed client's requests are answered, then the connection closes`() {
        var state = State(now: 0, timeouts: Self.timeouts)
        state.requestReceived(Self.get)
        state.peerEnded()
        #expect(state.afterRead() == .wait)  // the request in flight is still answered
        let response = state.responseArrived()
        #expect(response?.keepAlive == true)
        let afterSend = state.outputSent(now: 0)
        #expect(afterSend == .none)
        let closes = state.needInput(atBoundary: true, now: 0)
        #expect(closes)  // nothing more will come
    }

    @Test func `a second response to one request traps`() async {
        await #expect(processExitsWith: .failure) {
            var state = HTTPConnectionState(
                now: 0, timeouts: .init(idle: 1, request: 1, write: 1))
            state.requestReceived(.init(isHead: false, keepAlive: true, version: .http1_1))
            _ = state.responseArrived()
            _ = state.responseArrived()
        }
    }

    @Test func `a request parsed while another is answered traps`() async {
        await #expect(processExitsWith: .failure) {
            var state = HTTPConnectionState(now: 0, timeouts: .init(idle: 1, request: 1, write: 1))
            state.requestReceived(.init(isHead: false, keepAlive: true, version: .http1_1))
            state.requestReceived(.init(isHead: false, keepAlive: true, version: .http1_1))
        }
    }

    @Test func `stream bytes for a connection that never opened a stream trap`() async {
        await #expect(processExitsWith: .failure) {
            let state = HTTPConnectionState(now: 0, timeouts: .init(idle: 1, request: 1, write: 1))
            _ = state.streamAccepts()
        }
    }
}
