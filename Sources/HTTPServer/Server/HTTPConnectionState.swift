/// The state of one HTTP connection and its rules, apart from the socket: what phase it is in, which
/// deadline runs, what happens once the output is sent, how far the client's side has got.
///
/// `HTTPConnection` does the I/O and tells this value what happened; each event returns what the
/// connection must do next. Time comes in as an argument (milliseconds of a monotonic clock), so
/// the rules are tested without sockets or sleeps (`HTTPConnectionStateTests`). An event the state
/// does not allow (a second response to one request, a response while streaming) is a bug in the
/// server and traps, rather than being ignored; what may legitimately arrive late (a response, a
/// stream write or end after the connection closed) is answered with `.ignore`-like actions.
struct HTTPConnectionState {
    /// How long each wait may last, in milliseconds.
    struct Timeouts: Equatable {
        /// A kept-alive connection waiting for its next request.
        var idle: UInt64
        /// From a request's first byte to its last.
        var request: UInt64
        /// Output waiting for a client that reads nothing.
        var write: UInt64
        /// Draining a refused client's input after our side shut down.
        var linger: UInt64 = 2_000
    }

    /// The request being answered: what its response must respect.
    struct Request: Equatable {
        var isHead: Bool
        var keepAlive: Bool
        var version: HTTPVersion
    }

    enum Phase: Equatable {
        /// Parsing requests (or waiting for output to drain before parsing the next one).
        case reading
        /// A request was handed to the responder; its response has not arrived yet.
        case responding(Request)
        /// A streamed response is open.
        case streaming(chunked: Bool)
        /// An error response was sent and our side shut down; unread input is drained for a moment
        /// so the kernel does not reset the connection before the client has read the response.
        case lingering
        case closed
    }

    enum Deadline: Equatable {
        case none
        /// Waiting for the next request on a kept-alive connection. Blank lines before a request do
        /// not move it (RFC 9112 §2.2 lets a server skip them, not count them as activity).
        case idle(UInt64)
        /// A request has started arriving and must be complete by then.
        case request(UInt64)
        /// Output is waiting for the client to read it; moved on whenever the kernel takes bytes,
        /// so only a client that reads nothing for the write timeout is dropped.
        case write(UInt64)
        /// A lingering close ends by then at the latest.
        case linger(UInt64)
    }

    /// What happens once the output has all been sent.
    enum AfterFlush: Equatable {
        case stayOpen
        case close
        /// Shut down our side, drain what the client still sends for a moment, then close: after
        /// an error answered before its request was read in full.
        case lingerThenClose
    }

    /// How far the client's side of the connection has got.
    enum Inbound: Equatable {
        /// Reading as bytes arrive.
        case open
        /// Reading stopped at the input limit before the socket was drained; it resumes once the
        /// buffered requests are answered. `hangUp`: the client's end of stream is still to be read.
        case paused(hangUp: Bool)
        /// The client shut down its sending side. Every request it sent in full is still answered
        /// (a half-close after pipelined requests is a normal end), then the connection closes.
        case ended
    }

    let timeouts: Timeouts
    private(set) var phase = Phase.reading
    private(set) var deadline: Deadline
    private(set) var afterFlush = AfterFlush.stayOpen
    private(set) var inbound = Inbound.open
    /// The server is stopping: answer what is in flight, take no new request.
    private(set) var draining = false

    /// A new connection gets the request timeout, not the keep-alive idle one, to send its first
    /// request: opening connections and sending nothing must not hold them longer than sending
    /// half a request does.
    init(now: UInt64, timeouts: Timeouts) {
        self.timeouts = timeouts
        deadline = .idle(now + min(timeouts.idle, timeouts.request))
    }

    var isReading: Bool { phase == .reading }
    var isClosed: Bool { phase == .closed }

    /// Whether bytes read from the socket are kept: an event-stream client has nothing to say, and
    /// a refused one is only drained.
    var keepsInput: Bool {
        switch phase {
        case .streaming, .lingering: false
        case .reading, .responding, .closed: true
        }
    }

    // MARK: Time

    enum TickAction: Equatable {
        case none
        case close
        /// The request did not arrive in full in time: refuse it (`refuse()`) with a 408.
        case requestTimedOut
    }

    func tick(now: UInt64) -> TickAction {
        switch deadline {
        case .none: .none
        case .request(let time): now >= time ? .requestTimedOut : .none
        case .idle(let time), .write(let time), .linger(let time): now >= time ? .close : .none
        }
    }

    // MARK: Input

    /// Reading stopped at the input limit.
    mutating func inputPaused(hangUp: Bool) {
        inbound = .paused(hangUp: hangUp)
    }

    /// Reading resumes after a pause; returns whether the end of stream is still to be read, or nil
    /// when reading was not paused.
    mutating func resumeInput() -> Bool? {
        guard case .paused(let hangUp) = inbound else { return nil }
        inbound = .open
        return hangUp
    }

    /// The client shut down its sending side.
    mutating func peerEnded() {
        inbound = .ended
    }

    enum ReadAction: Equatable {
        /// Parse what arrived.
        case process
        case close
        /// Requests that follow are answered after this one, even after a half-close.
        case wait
    }

    /// What to do with bytes (or an end of stream) that just arrived.
    func afterRead() -> ReadAction {
        switch phase {
        case .reading: .process
        case .streaming where inbound == .ended, .lingering where inbound == .ended: .close
        case .responding, .streaming, .lingering, .closed: .wait
        }
    }

    /// The parser needs more bytes. `atBoundary`: nothing of a next request has arrived yet.
    /// Returns whether the connection closes now.
    mutating func needInput(atBoundary: Bool, now: UInt64) -> Bool {
        precondition(phase == .reading, "input wanted while \(phase)")
        if inbound == .ended { return true }  // every request received in full has been answered
        if atBoundary {
            if draining { return true }
            // A response has just been sent. Blank lines alone keep the deadline as it is.
            if deadline == .none { deadline = .idle(now + timeouts.idle) }
        } else if case .request = deadline {
            // keep the deadline set when this request began
        } else {
            deadline = .request(now + timeouts.request)
        }
        return false
    }

    /// A whole request arrived and goes to the responder.
    mutating func requestReceived(_ request: Request) {
        precondition(phase == .reading, "a request parsed while \(phase)")
        deadline = .none
        phase = .responding(request)
    }

    /// A head that waits for `100 Continue` goes to the responder before its body is read; if the
    /// responder answers, the connection closes after the answer. Returns the deadline to restore
    /// when it does not (`readBody(restoring:)`).
    mutating func judgeBeforeBody(_ request: Request) -> Deadline {
        precondition(phase == .reading, "a head judged while \(phase)")
        phase = .responding(Request(isHead: request.isHead, keepAlive: false, version: request.version))
        afterFlush = .lingerThenClose
        let requestDeadline = deadline
        deadline = .none  // an answer sent at once sets the linger deadline
        return requestDeadline
    }

    /// The responder let the body come: reading goes on as before the head was judged.
    mutating func readBody(restoring requestDeadline: Deadline) {
        guard case .responding = phase, afterFlush == .lingerThenClose else {
            preconditionFailure("a body read after its head was answered (\(phase), \(afterFlush))")
        }
        phase = .reading
        afterFlush = .stayOpen
        deadline = requestDeadline
    }

    /// A request the server cannot take (malformed, too big, too slow). Returns the request to
    /// answer with an error, after which the connection lingers and closes; nil when nothing can be
    /// answered any more (another response is under way) and the connection just closes.
    mutating func refuse() -> Request? {
        guard phase == .reading else { return nil }
        let request = Request(isHead: false, keepAlive: false, version: .http1_1)
        phase = .responding(request)
        afterFlush = .lingerThenClose
        return request
    }

    // MARK: Output

    /// The responder's answer to the request in flight. Returns the request with whether the
    /// connection stays open after it, or nil when the connection closed meanwhile.
    mutating func responseArrived() -> (request: Request, keepAlive: Bool)? {
        switch phase {
        case .closed:
            return nil
        case .responding(let request):
            let keepAlive = request.keepAlive && !draining && afterFlush == .stayOpen
            if !keepAlive && afterFlush == .stayOpen { afterFlush = .close }
            phase = .reading
            return (request, keepAlive)
        case .reading, .streaming, .lingering:
            preconditionFailure("a response arrived while \(phase)")
        }
    }

    /// The responder opens a stream for the request in flight. Returns the request, whether the
    /// stream is chunked, whether the connection may stay open after it, and whether to end it at
    /// once (the server is stopping); nil when the connection closed meanwhile.
    mutating func streamStarted() -> (request: Request, chunked: Bool, keepAlive: Bool, finishNow: Bool)? {
        switch phase {
        case .closed:
            return nil
        case .responding(let request):
            let chunked = request.version == .http1_1
            phase = .streaming(chunked: chunked)
            return (request, chunked, chunked && !draining, draining)
        case .reading, .streaming, .lingering:
            preconditionFailure("a stream opened while \(phase)")
        }
    }

    /// Whether stream bytes are written chunked; nil when the stream has ended (it was finished, or
    /// the connection closed), so bytes are dropped.
    func streamAccepts() -> Bool? {
        switch phase {
        case .streaming(let chunked): afterFlush == .stayOpen ? chunked : nil
        case .closed: nil
        case .reading, .responding, .lingering: preconditionFailure("stream bytes while \(phase)")
        }
    }

    /// Ends the open stream. Returns whether it was chunked (so its last chunk is due), or nil when
    /// it had ended already.
    mutating func finishStream() -> Bool? {
        guard case .streaming(let chunked) = phase, afterFlush == .stayOpen else { return nil }
        afterFlush = .close
        return chunked
    }

    /// The client reads nothing and output waits: the write deadline runs from the last time the
    /// kernel took bytes (`progressed`).
    mutating func outputBlocked(progressed: Bool, now: UInt64) {
        if case .write = deadline, !progressed { return }
        deadline = .write(now + timeouts.write)
    }

    enum FlushedAction: Equatable {
        case none
        case close
        /// Shut down our sending side and drain what the client still sends, until the deadline.
        case linger
    }

    /// Every byte of output was sent.
    mutating func outputSent(now: UInt64) -> FlushedAction {
        if case .write = deadline { deadline = .none }
        switch afterFlush {
        case .stayOpen:
            return .none
        case .lingerThenClose where inbound != .ended:
            afterFlush = .close
            phase = .lingering
            deadline = .linger(now + timeouts.linger)
            return .linger
        case .close, .lingerThenClose:
            return .close
        }
    }

    // MARK: Ending

    enum DrainAction: Equatable {
        case none
        case close
        case finishStream
    }

    /// The server is stopping. `idle`: no request has begun, nothing unread, nothing unsent.
    mutating func drain(idle: Bool) -> DrainAction {
        draining = true
        switch phase {
        case .reading where idle: return .close
        case .streaming: return .finishStream
        case .reading, .responding, .lingering, .closed: return .none  // what is in flight finishes, then it closes
        }
    }

    /// The connection closes; false when it was closed already.
    mutating func close() -> Bool {
        guard phase != .closed else { return false }
        phase = .closed
        return true
    }
}
