import APICore
import Digest
import Dispatch
import HTTPServer
import JSON
import LibraryDomain
import LiveEngine

/// One `GET /events` stream carrying many watches: each watch is an ordinary subscription of the
/// hub whose events land here, and go out in frames.
///
/// A frame is one SSE event (no `event:` line, so `EventSource.onmessage` gets it) whose `data:`
/// is a JSON array of `{"watch", "event", "data"}` entries, possibly over several `data:` lines,
/// and whose `id:` line comes last: `<seq>.<tag>`. `seq` is a change every watch is exactly at
/// once the frame is read, so ids strictly increase and resuming from one neither loses nor
/// repeats a change, whichever watches a write touched. `tag` names the watches the stream
/// carried (a 96-bit digest of each), so that a reconnect with a changed set resumes the old
/// watches and sends the new ones a snapshot.
///
/// A frame is closed (its `id:` written) only when every watch has sent its first events
/// (snapshot or replay) and the live side has applied every change up to the newest of them;
/// a collection's snapshot pages are written into the open frame as they are read. Meanwhile, and
/// whenever the connection falls behind, each watch's changes fold into one (`PendingEvents`), so a
/// slow reader costs memory for what changed, not for how often.
@LiveActor
final class Multiplexer: StreamDeadlines.Expiring {
    /// One watch and what waits to be written for it.
    @LiveActor final class Part {
        let watch: String
        let target: LiveTarget
        /// What the watch names, however it is spelled: a stream carries each at most once.
        let key: WatchKey
        let watchJSON: [UInt8]
        /// Its part of the stream's frame ids (`Multiplexer.watchTag`), computed once.
        let tag: String
        var subscriberID: Int?
        /// Its first events have all been handed over.
        var settled = false
        /// Its resource was deleted (its `delete` is its last event).
        var deleted = false
        /// Removed by the client while its snapshot was still being written: it goes once settled.
        /// It is no longer the stream's watch of its text (`Multiplexer.active`), so the same
        /// text added again is a new watch with a snapshot of its own.
        var removing = false
        /// Gone from the stream: unsubscribed, nothing of it left to write.
        var dropped = false
        /// A collection watch waiting for its turn to read its snapshot (`Multiplexer.subscribe`).
        var queued = false
        /// What waits for the next frame: a snapshot, one folded change, a delete.
        var waiting = PendingEvents()
        /// A page of its collection snapshot waiting for the frame to be free.
        var waitingPage: (event: LiveEvent, next: @Sendable @LiveActor () -> Void)?

        init(watch: String, request: SubscriptionRequest) {
            self.watch = watch
            self.target = request.target
            self.key = WatchKey(request)
            var json = JSONWriter()
            json.string(watch)
            watchJSON = json.bytes
            tag = Multiplexer.watchTag(watch)
        }

        /// Whether it is in `Multiplexer.pending`.
        var listed = false
        /// Ended by narrower rights: its `revoked` entry waits for the next frame.
        var revoked = false
    }

    /// The most watches one stream opened by `GET` carries (their text and tags must fit a request head).
    nonisolated static let maxWatches = 100
    /// The most watches one stream opened by `POST /events` carries (their text comes in the body).
    nonisolated static let maxPostedWatches = 10_000
    /// The most watches of one target (one book, one library, one collection with its filters) a
    /// stream carries, whatever their fields: each is a snapshot of its own, and a library's is
    /// its whole membership.
    nonisolated static let maxWatchesPerTarget = 8

    let hub: LiveHub
    /// Who opened the stream, as its latest credential says (`adopt`): what its watches may
    /// read, and when it ends.
    private(set) var principal: Principal
    private let deadlines: StreamDeadlines
    private var deadline: StreamDeadlines.Entry?
    /// The stream's watches by text, and by what they name: every side-channel call costs work
    /// for the watches it names, never for every watch the stream holds.
    private var active: [String: Part] = [:]
    private var activeKeys: [WatchKey: Part] = [:]
    /// How many of the stream's watches each target has (`maxWatchesPerTarget` at most).
    private var perTarget: [LiveTarget: Int] = [:]
    /// Every watch with a subscription, the removed ones among them until they settle.
    private var subscribed: [ObjectIdentifier: Part] = [:]
    let tag: String
    /// The id `POST /events/{streamId}` names this stream by (streams opened by `POST` only).
    var streamID: String?
    private(set) var stream: HTTPStream?
    /// Watches with something to write, in the order they got it: a frame costs work for the
    /// watches a change touched, not for every watch of the stream.
    private var pending: [Part] = []
    /// Opening, open, refused or over, and the gates a frame passes: the rules, apart from the data.
    private var state: MultiplexerState
    /// Entries written in the open frame; nil when no frame is open.
    private var frameEntries: Int?
    /// The watch whose snapshot pages are being written into the open frame.
    private var paging: Part?
    /// Watches with a snapshot page waiting for the frame to be free, in the order they came
    /// (from `waitingHead` on).
    private var waitingPages: [Part] = []
    private var waitingHead = 0
    /// The collection watch whose snapshot is being read, and those waiting their turn (from
    /// `queuedHead` on): a stream reads one collection snapshot at a time.
    private var reading: Part?
    private var queued: [(part: Part, request: SubscriptionRequest)] = []
    private var queuedHead = 0

    /// Whether the client has hung up: outcomes that arrive then end the work instead of
    /// building snapshots for nobody.
    private let peerHasGone: @Sendable () -> Bool

    /// `tagged`: frame ids carry the watches' tags (`<seq>.<tag>`), so that a browser's
    /// `EventSource` can resume with no help; a stream opened by `POST /events` has bare `<seq>` ids,
    /// its client naming the watches that resume in the next request's body.
    init(
        hub: LiveHub, parts: [Part], principal: Principal = .everything, deadlines: StreamDeadlines = StreamDeadlines(),
        tagged: Bool = true, peerHasGone: @escaping @Sendable () -> Bool
    ) {
        self.hub = hub
        self.principal = principal
        self.deadlines = deadlines
        self.peerHasGone = peerHasGone
        for part in parts {
            active[part.watch] = part
            activeKeys[part.key] = part
            perTarget[part.target, default: 0] += 1
            subscribed[ObjectIdentifier(part)] = part
        }
        state = MultiplexerState(watches: parts.count, now: DispatchTime.now().uptimeNanoseconds)
        tag = tagged ? parts.map(\.tag).sorted().joined() : ""
    }

    /// How many characters one watch's tag has.
    nonisolated static let watchTagLength = 16

    /// One watch's tag: the first 96 bits of the SHA-256 of its text, in 16 base64url characters.
    ///
    /// A watch whose tag is in a resumed id is taken as one the client already has, and gets no
    /// snapshot; two watches with the same tag would leave the new one without its state. 96 bits
    /// of a cryptographic digest put a collision out of reach (about 2^48 digests for a birthday
    /// pair), where a 32-bit hash collides in seconds. 16 characters a watch keep the id of a
    /// 100-watch stream at 1.6 KB.
    nonisolated static func watchTag(_ watch: String) -> String {
        // 12 bytes are 16 base64url characters with no bits left over.
        Base64URL.encode(SHA256.digest(of: Array(watch.utf8)).prefix(12))
    }

    // MARK: Opening

    /// A watch's subscription answered: the stream opens once every one has, or fails with the
    /// first that could not.
    func outcome(
        _ part: Part,
        _ outcome: LiveHub.Outcome,
        resumed: Bool,
        open: () -> HTTPStream,
        fail: (APIError) -> Void,
        abandon: () -> Void
    ) {
        if let report = state.answerArrives() {
            // Another watch failed first, or ended the stream before it opened (a snapshot that
            // could not be read): this one's subscription goes too.
            if let id = part.subscriberID { hub.unsubscribe(id, from: part.target) }
            part.subscriberID = nil
            if report { fail(.unavailable()) }
            return
        }
        if peerHasGone() {
            state.refuse()
            unsubscribeAll()
            return abandon()
        }
        switch outcome {
        case .subscribed:
            break
        case .notFound where resumed:
            // Deleted at or before the id the client resumes from (it got that `delete`): nothing
            // to send.
            settle(part, through: 0)
            part.deleted = true
        case .deletedBeyondHistory where resumed, .absentWithoutTrace where resumed:
            // Gone, and the log does not tell when (or shows it never existed): it is deleted for
            // the client too, as a fresh snapshot would show. Not a 404: that would end the whole
            // stream, and a browser's EventSource for good, over one watch.
            part.waiting.add(LiveEvent(kind: .delete, seq: hub.position, id: part.target.resourceID ?? ""))
            list(part)
            settle(part, through: 0)
            part.deleted = true
        case .notFound, .deletedBeyondHistory, .absentWithoutTrace:
            state.refuse()
            unsubscribeAll()
            return fail(
                .notFound("watch \"\(part.watch.prefix(300))\": no \(EventStreams.describe(part.target)) exists."))
        case .failed(let error):
            state.refuse()
            unsubscribeAll()
            return fail(APIError(error, resource: EventStreams.describe(part.target)))
        }
        guard state.answered() else { return }
        let stream = open()
        stream.write(EventEncoding.opening)
        self.stream = stream
        startWaitingPage()
        scheduleFlush()
    }

    /// The connection closed: every watch's subscription goes.
    func closed() {
        _ = state.end()
        unsubscribeAll()
        if let streamID { Self.open[streamID] = nil }
        if let deadline { deadlines.cancel(deadline) }
        deadline = nil
    }

    // MARK: Credentials

    /// Ends the stream when its credential expires (`expire`).
    func scheduleExpiry() {
        if let deadline { deadlines.cancel(deadline) }
        deadline = principal.expires.map { deadlines.schedule(self, at: $0) }
    }

    /// The credential has expired: an `expired` event (outside any frame, so the last frame's id
    /// stays the one to resume from), then the end. In the middle of a frame (a collection
    /// snapshot being written) the stream just ends: the client drops the unfinished frame.
    func expire() {
        deadline = nil
        guard state.end() else { return }
        hub.counters.expiredStreams.add(1, ordering: .relaxed)
        unsubscribeAll()
        guard let stream else { return }
        if frameEntries == nil { stream.write(EventEncoding.expired) }
        stream.finish()
    }

    /// The side channel brought a new credential of the same principal: the stream now ends when
    /// it expires, and the watches its rights no longer cover end with a `revoked` entry. Rights
    /// that widen leave the watches as they are (a collection watch keeps the items of the
    /// libraries it was opened with; the client adds it again to see more).
    func adopt(_ new: Principal) {
        let old = principal
        principal = new
        if old.expires != new.expires, stream != nil { scheduleExpiry() }
        let readable = new.rights.readable
        switch (old.rights.readable, readable) {
        case (_, nil): return
        case (let before?, let after?) where before.isSubset(of: after): return
        default: break
        }
        var revoked: [String] = []
        for part in active.values where !part.deleted {
            let allowed: Bool
            switch part.target {
            case .library(let id): allowed = readable?.contains(id) ?? true
            case .book, .libraries, .books, .window:
                allowed = part.subscriberID.map { hub.narrow($0, of: part.target, to: readable) } ?? false
            }
            if !allowed { revoked.append(part.watch) }
        }
        guard !revoked.isEmpty else { return }
        let parts = revoked.compactMap { active[$0] }
        remove(revoked)
        for part in parts {
            part.revoked = true
            list(part)
        }
        scheduleFlush()
    }

    // MARK: Changing the watches of an open stream

    /// Streams opened by `POST /events`, by id, while open.
    static var open: [String: Multiplexer] = [:]

    /// Watches added while the stream runs: each gets its `snapshot` in a later frame, and frames
    /// wait for it as they wait for the first snapshots, so ids still name one change every
    /// watch is at. A watch already on the stream is left as it is.
    func add(_ watches: [(watch: String, request: SubscriptionRequest)]) {
        guard state.isLive else { return }
        for (watch, request) in watches where active[watch] == nil {
            let part = Part(watch: watch, request: request)
            active[watch] = part
            activeKeys[part.key] = part
            perTarget[part.target, default: 0] += 1
            subscribed[ObjectIdentifier(part)] = part
            state.watchAdded()
            _ = subscribe(part, request) { outcome in LiveActor.enqueue { self.added(part, outcome) } }
        }
    }

    /// Subscribes a watch to the hub, or queues it: a collection watch waits while another of
    /// this stream's collection snapshots is read. Returns whether it was queued.
    ///
    /// A collection snapshot holds one of the store's few snapshot readers for as long as its
    /// pages take to be written, and the frame takes one watch's pages at a time: the others' first
    /// pages would sit untaken, each holding a reader, until the store preempted them and ended
    /// the stream. Read one at a time, a stream of thousands of collection watches holds one reader
    /// and one page; its watches wait their turn (the frame waits for them, as for any snapshot).
    /// (A watch that resumes from an id older than the log's history gets a snapshot without
    /// waiting its turn.) A queued watch, once its turn comes, answers through `added`: its stream is open by then
    /// (a collection subscription cannot be refused, so the stream counted it as answered).
    func subscribe(
        _ part: Part, _ request: SubscriptionRequest, outcome: @escaping @Sendable (LiveHub.Outcome) -> Void
    ) -> Bool {
        // A watch that resumes replays the log instead, read once for all the watches that resume
        // in this turn (`LiveHub.resume`): it does not wait.
        if request.target.isCollection && request.resumeAfter == nil {
            guard reading == nil else {
                part.queued = true
                queued.append((part, request))
                return true
            }
            reading = part
        }
        hub.subscribe(
            request,
            open: { subscriberID in
                part.subscriberID = subscriberID
                return WatchSink(multiplexer: self, part: part)
            },
            outcome: outcome
        )
        return false
    }

    /// The collection watch being read has its snapshot: the next one in line begins.
    private func readNextCollection(after part: Part) {
        guard reading === part else { return }
        reading = nil
        guard state.isLive else { return }
        while queuedHead < queued.count {
            let (next, request) = queued[queuedHead]
            queuedHead += 1
            guard next.queued else { continue }  // removed while it waited
            next.queued = false
            _ = subscribe(next, request) { outcome in LiveActor.enqueue { self.added(next, outcome) } }
            return
        }
        queued.removeAll(keepingCapacity: true)
        queuedHead = 0
    }

    private func added(_ part: Part, _ outcome: LiveHub.Outcome) {
        guard state.isLive else {
            if let id = part.subscriberID { hub.unsubscribe(id, from: part.target) }
            part.subscriberID = nil
            return
        }
        switch outcome {
        case .subscribed:
            // Settles when its first events are handed over, and goes then if it was removed
            // meanwhile: unsubscribing it now would leave the stream waiting for it for good.
            break
        case .notFound, .deletedBeyondHistory, .absentWithoutTrace:
            // Not a refusal of the whole stream: this watch's resource is gone, as a `delete` says.
            if !part.removing {
                part.waiting.add(LiveEvent(kind: .delete, seq: hub.position, id: part.target.resourceID ?? ""))
                part.deleted = true
                list(part)
            }
            settle(part, through: 0)
            scheduleFlush()
        case .failed:
            // The snapshot could not be read: the stream ends and the client resumes.
            _ = state.end()
            unsubscribeAll()
            if let stream { stream.finish() }
        }
    }

    /// Watches removed while the stream runs: their subscriptions go and nothing more is written
    /// for them. One whose snapshot is still being written goes when it is done.
    func remove(_ watches: [String]) {
        for watch in watches {
            guard let part = active.removeValue(forKey: watch) else { continue }
            activeKeys[part.key] = nil
            perTarget[part.target]! -= 1
            if perTarget[part.target] == 0 { perTarget[part.target] = nil }
            part.removing = true
            if part.queued {
                // Never subscribed: it settles (the frames no longer wait for it) and goes.
                part.queued = false
                settle(part, through: 0)
            } else if part.settled && paging !== part {
                drop(part)
            }
        }
        scheduleFlush()
    }

    /// Why the stream cannot take `remove` and then `add`, if it cannot: more watches than a
    /// stream carries, more of one target than `maxWatchesPerTarget`, or an added watch naming
    /// what a held one names (the same target and fields, spelled otherwise). Costs work for the
    /// watches named only.
    func refusal(removing: [String], adding: [(watch: String, request: SubscriptionRequest)]) -> APIError? {
        let removed = Set(removing)
        var count = active.count
        var targets: [LiveTarget: Int] = [:]
        for watch in removed {
            guard let part = active[watch] else { continue }
            count -= 1
            targets[part.target, default: perTarget[part.target] ?? 0] -= 1
        }
        for (watch, request) in adding {
            if let held = activeKeys[WatchKey(request)], !removed.contains(held.watch) {
                guard held.watch == watch else {
                    return EventStreams.badWatch(watch, "names what \"\(held.watch.prefix(300))\" names.")
                }
                continue  // already on the stream: left as it is
            }
            count += 1
            let held = targets[request.target, default: perTarget[request.target] ?? 0] + 1
            targets[request.target] = held
            if held > Self.maxWatchesPerTarget {
                return EventStreams.badWatch(watch, EventStreams.perTargetRefusal(request.target))
            }
        }
        guard count <= Self.maxPostedWatches else {
            return .badRequest("A stream carries at most \(Self.maxPostedWatches) watches; this change makes \(count).")
        }
        return nil
    }

    /// Takes a watch off the stream: its subscription goes, and whatever waits for it is not written
    /// (its place in `pending`, if any, is passed over by the next flush).
    private func drop(_ part: Part) {
        guard !part.dropped else { return }
        part.dropped = true
        if let id = part.subscriberID { hub.unsubscribe(id, from: part.target) }
        part.subscriberID = nil
        subscribed[ObjectIdentifier(part)] = nil
        part.waiting.clear()
        part.waitingPage = nil
    }

    private func unsubscribeAll() {
        if let streamID { Self.open[streamID] = nil }
        for part in subscribed.values {
            if let id = part.subscriberID { hub.unsubscribe(id, from: part.target) }
            part.subscriberID = nil
        }
    }

    // MARK: From the watches

    func receive(_ part: Part, _ event: LiveEvent) {
        hub.counters.events.add(1, ordering: .relaxed)
        guard !part.removing else { return }
        list(part)
        if event.kind == .delete { part.deleted = true }
        part.waiting.add(event)
        scheduleFlush()
    }

    func settled(_ part: Part, through seq: Int) {
        settle(part, through: seq)
        scheduleFlush()
    }

    private func settle(_ part: Part, through seq: Int) {
        state.settled(first: !part.settled, through: seq)
        part.settled = true
        if part.removing && paging !== part { drop(part) }
        readNextCollection(after: part)
    }

    private func list(_ part: Part) {
        guard !part.listed else { return }
        part.listed = true
        pending.append(part)
    }

    /// A watch's stream ended. After its `delete` that is expected; otherwise (the server stops,
    /// a snapshot could not be read) the whole stream ends and the client resumes.
    func finished(_ part: Part) {
        guard !part.deleted, state.end() else { return }
        unsubscribeAll()
        if let stream { stream.finish() }
    }

    /// A page of a watch's collection snapshot: written into the open frame when no other
    /// watch's pages are, else kept until they are done (the hub sends the next page only when
    /// asked, so one page per watch waits at most).
    func page(_ part: Part, _ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) {
        // A removed watch's snapshot is read to its end (the hub's paging goes on) but not
        // written, unless its first page is already in the open frame.
        if part.removing && paging !== part { return next() }
        guard let stream, state.isOpen, paging == nil || paging === part else {
            if part.waitingPage == nil { waitingPages.append(part) }
            part.waitingPage = (event, next)
            return
        }
        paging = part
        var bytes: [UInt8] = []
        if event.page?.isFirst == true {
            stream.setSendBuffer(EventStreamSink.largeSendBuffer)
            bytes += entryStart(part, kind: LiveEvent.Kind.snapshot.rawValue)
            bytes += EventEncoding.entryItemsStart
        }
        bytes += EventEncoding.pageItems(event, opening: [])
        let isLast = event.page?.isLast == true
        if isLast {
            bytes += EventEncoding.entryItemsEnd
            paging = nil
            if part.removing && part.settled { drop(part) }
        }
        stream.write(bytes)
        // As `EventStreamSink.sendPage`: the next page is read while this one is sent.
        guard isLast || stream.backlog > 1 else { return next() }
        stream.whenDrained {
            LiveActor.enqueue {
                if isLast { stream.setSendBuffer(EventStreamSink.sendBuffer) }
                next()
                self.startWaitingPage()
            }
        }
    }

    private func startWaitingPage() {
        guard paging == nil, stream != nil else { return }
        guard let part = nextWaitingPage(), let (event, next) = part.waitingPage else { return scheduleFlush() }
        part.waitingPage = nil
        page(part, event, then: next)
    }

    /// The first watch in line with a page still waiting (one dropped meanwhile has none).
    private func nextWaitingPage() -> Part? {
        while waitingHead < waitingPages.count {
            let part = waitingPages[waitingHead]
            waitingHead += 1
            if part.waitingPage != nil { return part }
        }
        waitingPages.removeAll(keepingCapacity: true)
        waitingHead = 0
        return nil
    }

    func keepAlive() {
        guard let stream,
            state.keepAliveDue(
                now: DispatchTime.now().uptimeNanoseconds, frameOpen: frameEntries != nil, backlog: stream.backlog)
        else { return }
        stream.write(EventEncoding.keepAlive)
    }

    // MARK: Frames

    private func scheduleFlush() {
        guard state.flushWanted() else { return }
        LiveActor.enqueue {
            self.state.flushRuns()
            self.flush()
        }
    }

    /// Writes what waits, and closes the frame, once every watch is at one same change.
    private func flush() {
        // A watch with a page waiting has not settled yet (its snapshot is not all sent).
        guard let stream else { return }
        switch state.flush(
            paging: paging != nil, position: hub.position, hasWork: frameEntries != nil || !pending.isEmpty,
            backlog: stream.backlog, maxBacklog: EventStreamSink.maxBacklog)
        {
        case .none, .waiting:
            return
        case .waitForApplied(let seq):
            hub.whenApplied(through: seq) {
                self.state.applied()
                self.scheduleFlush()
            }
            return
        case .waitForDrain:
            stream.whenDrained {
                LiveActor.enqueue {
                    self.state.drained()
                    self.scheduleFlush()
                }
            }
            return
        case .write:
            break
        }
        var bytes: [UInt8] = []
        for part in pending {
            part.listed = false
            if part.revoked {
                part.revoked = false
                bytes += entryStart(part, kind: "revoked") + EventEncoding.revoked + EventEncoding.entryEnd
                continue
            }
            for event in part.waiting.take() { bytes += entry(part, event) }
        }
        pending = []
        guard frameEntries != nil else { return }  // everything pending cancelled out
        bytes += EventEncoding.frameEnd(seq: hub.position, tag: tag)
        frameEntries = nil
        guard bytes.count > EventStreamSink.chunkSize else { return stream.write(bytes) }
        // A large frame (a deep resume of many watches can fold thousands of items into each)
        // goes out with the large send buffer, as a snapshot does: through the small one, on
        // loopback, each segment waited for a delayed acknowledgement, and 5.5 MB took 7 s.
        stream.setSendBuffer(EventStreamSink.largeSendBuffer)
        stream.write(bytes)
        stream.whenDrained {
            LiveActor.enqueue {
                if self.paging == nil { stream.setSendBuffer(EventStreamSink.sendBuffer) }
            }
        }
    }

    /// The start of an entry, up to its `data` value: opens the frame first if none is open.
    private func entryStart(_ part: Part, kind: String) -> [UInt8] {
        let bytes = EventEncoding.entryStart(opensFrame: frameEntries == nil, watchJSON: part.watchJSON, kind: kind)
        frameEntries = (frameEntries ?? 0) + 1
        return bytes
    }

    private func entry(_ part: Part, _ event: LiveEvent) -> [UInt8] {
        var bytes = entryStart(part, kind: event.kind.rawValue)
        // Encoded once for every stream whose watch has the same shape (as `wire` is for single
        // streams).
        bytes += event.dataWire.bytes { EventEncoding.data(event) }
        bytes += EventEncoding.entryEnd
        return bytes
    }
}

/// A watch's events, handed to its stream's `Multiplexer`, which folds them per watch
/// (`PendingEvents`, the rule a single stream's subscriber folds by) until its next frame.
///
/// Always ready, on purpose: a frame's id says that every watch is at that change, so when a
/// frame closes every change through it must be in the multiplexer's hands. A watch that reported
/// the connection's backlog would leave changes folded in its subscriber, behind the frame's id,
/// and a client resuming from that id would never get them. The connection's pace is kept by the
/// frames instead: none is written while the connection holds `EventStreamSink.maxBacklog` writes.
@LiveActor
final class WatchSink: LiveEventSink {
    let multiplexer: Multiplexer
    let part: Multiplexer.Part

    init(multiplexer: Multiplexer, part: Multiplexer.Part) {
        self.multiplexer = multiplexer
        self.part = part
    }

    var isReady: Bool { true }
    func send(_ event: LiveEvent) { multiplexer.receive(part, event) }
    func whenReady(_ callback: @escaping @Sendable () -> Void) { callback() }

    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) {
        multiplexer.page(part, event, then: next)
    }

    func settled(through seq: Int) { multiplexer.settled(part, through: seq) }
    func keepAlive() { multiplexer.keepAlive() }
    func finish() { multiplexer.finished(part) }
}
