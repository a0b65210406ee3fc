import APICore

/// The state of one multiplexed stream (`GET /events`, `POST /events`) apart from its watches'
/// data: whether it is opening, open, refused or over, and the gates a frame passes before it is
/// written (every watch settled, the live side at the newest change a watch reached, room on the
/// connection), with the waits it asked for.
///
/// `Multiplexer` tells it what happened and does what each answer says. Time comes in as an
/// argument (nanoseconds of a monotonic clock), so the rules are tested without a socket, a hub or
/// a sleep (`MultiplexerStateTests`). A move the state does not allow (an answer for a stream that
/// already opened, a wait ending that was never asked for, more watches settling than were added)
/// is a bug and traps.
struct MultiplexerState {
    enum Phase: Equatable {
        /// Waiting for this many watches' subscriptions to answer; the stream opens after the last.
        case opening(outstanding: Int)
        case open
        /// Refused before it opened: a watch's resource is missing, a snapshot failed, the client left.
        case refused
        /// Over: the connection closed, or a watch's stream ended (the server stops, a snapshot
        /// could not be read). `opened`: whether the stream had opened first.
        case ended(opened: Bool)
    }

    /// What a flush does now.
    enum FlushAction: Equatable {
        /// Nothing to write, or no stream to write it to.
        case none
        /// Wait until the live side has applied change `through` (one wait at a time).
        case waitForApplied(through: Int)
        /// Wait until the connection drained (one wait at a time).
        case waitForDrain
        /// A wait is already asked for: it schedules the next flush.
        case waiting
        /// Write the frame.
        case write
    }

    /// How long the stream stays silent before a keep-alive comment, in nanoseconds.
    static let keepAliveInterval: UInt64 = 1_000_000_000

    private(set) var phase: Phase
    /// Watches whose first events have not all been handed over yet.
    private(set) var unsettled: Int
    /// The newest change a watch's first events reached: frames wait for the live side to get there.
    private(set) var floor = 0
    private(set) var flushScheduled = false
    private(set) var waitingDrain = false
    private(set) var waitingApplied = false
    private var lastKeepAlive: UInt64

    init(watches: Int, now: UInt64) {
        precondition(watches > 0, "a stream has at least one watch")
        phase = .opening(outstanding: watches)
        unsettled = watches
        lastKeepAlive = now
    }

    /// Neither refused nor over: watches may still be added and frames written.
    var isLive: Bool {
        switch phase {
        case .opening, .open: true
        case .refused, .ended: false
        }
    }

    var isOpen: Bool { phase == .open }

    // MARK: Opening

    /// Whether an answer that arrives now is dropped (the stream is refused or over already), and
    /// then whether to answer the request with a 503 (it ended before it could open); nil when the
    /// answer is to be looked at.
    mutating func answerArrives() -> Bool? {
        switch phase {
        case .opening: return nil
        case .ended(opened: false):
            phase = .refused
            return true
        case .refused, .ended(opened: true): return false
        case .open: preconditionFailure("a first answer for a stream that is open")
        }
    }

    /// A watch's subscription answered and the watch can be served: returns whether that was the
    /// last one, so the stream opens now.
    mutating func answered() -> Bool {
        guard case .opening(let outstanding) = phase else { preconditionFailure("an answer while \(phase)") }
        phase = outstanding == 1 ? .open : .opening(outstanding: outstanding - 1)
        return outstanding == 1
    }

    /// The stream is refused before it opened (a missing resource, a failed snapshot, a client
    /// that left).
    mutating func refuse() {
        guard case .opening = phase else { preconditionFailure("refused while \(phase)") }
        phase = .refused
    }

    /// The stream is over; false when it was refused or over already.
    mutating func end() -> Bool {
        switch phase {
        case .opening:
            phase = .ended(opened: false)
            return true
        case .open:
            phase = .ended(opened: true)
            return true
        case .refused, .ended:
            return false
        }
    }

    // MARK: Watches

    /// A watch joined the open (or opening) stream; frames wait for its first events.
    mutating func watchAdded() {
        precondition(isLive, "a watch added to a stream that is \(phase)")
        unsettled += 1
    }

    /// A watch's first events were all handed over, reaching change `seq`. `first`: whether this
    /// is the watch's first settling (a watch settles once).
    mutating func settled(first: Bool, through seq: Int) {
        if first {
            precondition(unsettled > 0, "more watches settled than were added")
            unsettled -= 1
        }
        floor = max(floor, seq)
    }

    // MARK: Frames

    /// Something may be written: returns whether a flush must be scheduled (one at a time).
    mutating func flushWanted() -> Bool {
        guard !flushScheduled else { return false }
        flushScheduled = true
        return true
    }

    /// The scheduled flush runs now.
    mutating func flushRuns() {
        precondition(flushScheduled, "a flush that was not scheduled")
        flushScheduled = false
    }

    /// Whether a frame is written now. `paging`: a watch's snapshot pages are being written;
    /// `position`: the change the live side has applied; `hasWork`: entries wait or a frame is
    /// open; `backlog`: writes queued on the connection.
    mutating func flush(paging: Bool, position: Int, hasWork: Bool, backlog: Int, maxBacklog: Int) -> FlushAction {
        guard phase == .open, !paging, unsettled == 0 else { return .none }
        guard position >= floor else {
            if waitingApplied { return .waiting }
            waitingApplied = true
            return .waitForApplied(through: floor)
        }
        guard hasWork else { return .none }
        guard backlog < maxBacklog else {
            if waitingDrain { return .waiting }
            waitingDrain = true
            return .waitForDrain
        }
        return .write
    }

    /// The live side reached the change a flush waited for.
    mutating func applied() {
        precondition(waitingApplied, "an applied change nobody waited for")
        waitingApplied = false
    }

    /// The connection drained, as a flush waited for.
    mutating func drained() {
        precondition(waitingDrain, "a drain nobody waited for")
        waitingDrain = false
    }

    /// Whether a keep-alive comment is due at `now`: the stream is open and silent (no frame
    /// open, nothing queued) for a second since the last one.
    mutating func keepAliveDue(now: UInt64, frameOpen: Bool, backlog: Int) -> Bool {
        guard phase == .open, !frameOpen, backlog == 0, now - lastKeepAlive > Self.keepAliveInterval else {
            return false
        }
        lastKeepAlive = now
        return true
    }
}
