/// One open event stream: what it asked for and what it has not been sent yet.
///
/// At most one event is on its way to the client at a time; changes that arrive meanwhile fold
/// into one pending event (latest value per field, latest id), so a slow reader costs a bounded
/// amount of memory whatever the write rate.
@LiveActor
package final class Subscriber {
    package let id: Int
    let request: SubscriptionRequest
    let sink: any LiveEventSink
    /// Events held back while a replay is read from the change log.
    var held: [LiveEvent]?
    private var pending: LiveEvent?
    private var waiting = false
    private(set) var finished = false
    /// Changes folded into a pending event, for metrics.
    private(set) var coalesced = 0

    init(id: Int, request: SubscriptionRequest, sink: any LiveEventSink) {
        self.id = id
        self.request = request
        self.sink = sink
    }

    /// Sends `event` now if the connection keeps up, else folds it into the pending event.
    /// A replay is sent whole (`coalescing: false`): every missed change, in order.
    func deliver(_ event: LiveEvent, coalescing: Bool = true) {
        guard !finished, !event.isEmptyChange else { return }
        if held != nil {
            held!.append(event)
            return
        }
        if event.kind != .change || !coalescing {
            // A snapshot or delete supersedes a pending change; an uncoalesced change follows it.
            if event.kind == .change, let earlier = pending { sink.send(earlier) }
            pending = nil
            sink.send(event)
            if event.kind == .delete { finish() }
            return
        }
        if pending == nil && sink.isReady {
            sink.send(event)
            return
        }
        if let earlier = pending {
            coalesced += 1
            pending = earlier.coalesced(with: event)
        } else {
            pending = event
        }
        waitForReady()
    }

    /// Sends the events held during a replay, then goes live.
    func release() {
        let events = held ?? []
        held = nil
        for event in events { deliver(event) }
    }

    func keepAlive() {
        if !finished && pending == nil && held == nil && sink.isReady { sink.keepAlive() }
    }

    func finish() {
        guard !finished else { return }
        finished = true
        pending = nil
        sink.finish()
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
        guard let event = pending, !finished else { return }
        if sink.isReady {
            pending = nil
            sink.send(event)
        } else {
            waitForReady()
        }
    }
}
