import LibraryDomain

/// One open event stream: what it asked for and what it has not been sent yet.
///
/// Events go straight to the connection while it keeps up (`LiveEventSink.isReady`). Once it
/// falls behind, changes fold into one pending change (`PendingEvents`: latest value per field and
/// member, latest id) that is sent when the connection drains, so a slow reader costs a bounded
/// amount of memory whatever the write rate.
@LiveActor
package final class Subscriber {
    /// Live changes that arrive while a replay is read from the change log, or a collection's
    /// snapshot is sent, to be sent after it.
    struct Held {
        var events = PendingEvents()
        /// While a snapshot has not yet fixed its id (`floor`): the changes so far, whole, since
        /// those it includes must be told from those it does not.
        var early: [LiveEvent]?
    }

    package let id: Int
    /// What it asked for. Only a book subscriber's `readable` changes once it has joined
    /// (`LiveHub.narrow`): the rest decides its group in its audience.
    var request: SubscriptionRequest
    let sink: any LiveEventSink
    var held: Held?
    /// The id of the snapshot this subscriber was sent: changes up to it are in it already.
    private(set) var floor = 0
    /// The collection snapshot being sent, closed if the stream ends first.
    var snapshot: (any CollectionSnapshot)?
    /// Changes folded while the connection is behind (only changes: a snapshot or a delete is
    /// sent at once, and supersedes them).
    private var pending = PendingEvents()
    private var waiting = false
    private(set) var finished = false
    /// Changes folded into a pending one, for metrics.
    var coalesced: Int { pending.folded }

    init(id: Int, request: SubscriptionRequest, sink: any LiveEventSink) {
        self.id = id
        self.request = request
        self.sink = sink
    }

    /// Sends `event` now if the connection keeps up, else folds it into the pending change.
    /// A replay is sent whole (`coalescing: false`): every missed change, in order.
    func deliver(_ event: LiveEvent, coalescing: Bool = true) {
        guard !finished, !event.isEmptyChange, event.kind != .change || event.seq > floor else { return }
        if straddlesFloor(event) { return finish() }
        if held != nil {
            if held!.early != nil {
                // Kept whole until the snapshot's id is known, a bounded while: past that, the
                // stream ends and the client starts over (or resumes) rather than the server
                // holding changes without limit.
                guard held!.early!.count < Self.maxEarly else { return finish() }
                held!.early!.append(event)
            } else {
                held!.events.add(event)
            }
            return
        }
        if event.kind != .change || !coalescing {
            // A snapshot or delete supersedes a pending change; an uncoalesced change follows it.
            if event.kind == .change { pending.take().forEach(sink.send) }
            pending.clear()
            sink.send(event)
            if event.kind == .delete { finish() }
            return
        }
        if pending.isEmpty && sink.isReady {
            sink.send(event)
            return
        }
        pending.add(event)
        waitForReady()
    }

    /// Holds live changes until a collection snapshot, whose id is not known yet, has been sent.
    func holdForSnapshot() {
        held = Held(early: [])
    }

    /// The snapshot being sent includes every change through `seq`: drops those held, and any
    /// that come later, and folds the rest until `release`.
    func setFloor(_ seq: Int) {
        floor = seq
        guard let early = held?.early else { return }
        held!.early = nil
        for event in early { deliver(event) }
    }

    /// How many changes a collection subscriber holds whole while its snapshot's id is not known.
    static let maxEarly = 10_000

    /// Whether `event` folds changes from both sides of this subscriber's snapshot: some of it is
    /// in the snapshot, some not, and a collection's change cannot be split (it carries states,
    /// not steps). The stream then ends; the client resumes from its last id, or starts over,
    /// from the change log, which has every step. Only while the live side is far behind.
    private func straddlesFloor(_ event: LiveEvent) -> Bool {
        guard let from = event.foldedFrom, held?.early == nil else { return false }
        return from <= floor && floor < event.seq
    }

    /// Sends what was missed and what was held meanwhile, then goes live. A resource's replayed
    /// events are sent whole and in order; a collection's are folded into one change, since a
    /// replay can hold as many changes as the kept history.
    func release(after replayed: [LiveEvent]) {
        let held = self.held
        self.held = nil
        if request.target.isCollection, let first = replayed.first {
            var folded = FoldedChange(first)
            replayed.dropFirst().forEach { folded.fold($0) }
            deliver(folded.event)
        } else {
            for event in replayed { deliver(event, coalescing: false) }
        }
        var waiting = held?.events ?? PendingEvents()
        waiting.take().forEach { deliver($0) }
    }

    func keepAlive() {
        // Before a collection snapshot's first page nothing of it is written yet.
        guard !finished, pending.isEmpty, held == nil || held?.early != nil, sink.isReady else { return }
        sink.keepAlive()
    }

    /// Taken out of its audience (its stream closed): reads started for it are dropped.
    private(set) var removed = false

    func remove() {
        removed = true
        closeSnapshot()
    }

    func finish() {
        guard !finished else { return }
        finished = true
        pending.clear()
        closeSnapshot()
        sink.finish()
    }

    func closeSnapshot() {
        snapshot?.close()
        snapshot = nil
    }

    private func waitForReady() {
        guard !waiting else { return }
        waiting = true
        sink.whenReady { [weak self] in
            LiveActor.enqueue { self?.ready() }
        }
    }

    private func ready() {
        waiting = false
        guard !pending.isEmpty, !finished else { return }
        if sink.isReady {
            pending.take().forEach(sink.send)  // nothing, if what was folded cancelled out
        } else {
            waitForReady()
        }
    }
}
