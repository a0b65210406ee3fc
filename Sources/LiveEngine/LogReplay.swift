import LibraryDomain

/// Reads of the change log for subscribers that resume (`Last-Event-ID`), and the events made from
/// what they read.
///
/// Subscribers that resume over the same stretch of the same log read it once: the watches of one
/// `/events` stream resume from one id in one turn of the live actor, and a hundred collection
/// watches once cost a hundred reads of thousands of changes (issue "hardening III", item 1).
/// Those with the same target and fields share the events made from it too, and a collection's
/// history is folded once for the widest fields asked of it, then cut for each.
@LiveActor
final class LogReplay {
    /// One read of the change log: what it reads (`LiveTarget.logQuery`) and the stretch of the log.
    private struct Key: Hashable {
        let target: LiveTarget
        let after: Int
        let through: Int
    }

    /// What makes two subscribers' replayed events the same.
    private struct Shape: Hashable {
        let target: LiveTarget
        let fields: SubscriptionRequest.Shape
        /// A book's too: one moved out of them is deleted for its subscriber.
        let readable: Set<String>?
    }

    /// Subscribers of one collection who may see the same items: its history is folded once for them.
    private struct Audience: Hashable {
        let target: LiveTarget
        let readable: Set<String>?

        init(_ request: SubscriptionRequest) {
            target = request.target
            readable = request.readable
        }
    }

    /// What a subscriber is handed once the read is back: the read's result, and its events
    /// (none when the read failed or the log no longer reaches back).
    typealias Delivery = @LiveActor (Result<[CommittedChange]?, StoreError>, [LiveEvent]) -> Void

    private struct Waiter {
        let subscriber: Subscriber
        let deliver: Delivery
    }

    private let store: any LiveStore
    /// Reads under way, each with the subscribers waiting for it.
    private var reads: [Key: [Waiter]] = [:]

    nonisolated init(store: any LiveStore) {
        self.store = store
    }

    /// Reads (or joins a read of) the log of `subscriber`'s target from `after` through `through`,
    /// and hands it its events.
    func read(for subscriber: Subscriber, after: Int, through: Int, deliver: @escaping Delivery) {
        let key = Key(target: subscriber.request.target.logQuery, after: after, through: through)
        let waiter = Waiter(subscriber: subscriber, deliver: deliver)
        if reads[key] != nil {
            reads[key]!.append(waiter)
            return
        }
        reads[key] = [waiter]
        store.changes(of: key.target, after: after, through: through) { result in
            LiveActor.enqueue {
                guard let waiters = self.reads.removeValue(forKey: key) else { return }
                self.hand(result, to: waiters)
            }
        }
    }

    private func hand(_ result: Result<[CommittedChange]?, StoreError>, to waiters: [Waiter]) {
        guard case .success(let changes?) = result else {
            for waiter in waiters { waiter.deliver(result, []) }
            return
        }
        // A collection's history is folded once for every field set asked of it, then cut for
        // each: the fold costs work per logged change once per target, not per field set.
        // (Per set of readable libraries too: those decide which items a collection has.)
        var widest: [Audience: SubscriptionRequest] = [:]
        for waiter in waiters where waiter.subscriber.request.target.isCollection {
            let request = waiter.subscriber.request
            let audience = Audience(request)
            widest[audience] = widest[audience].map { $0.widened(by: request) } ?? request
        }
        var folded: [Audience: [LiveEvent]] = [:]
        var shared: [Shape: [LiveEvent]] = [:]
        for waiter in waiters {
            let request = waiter.subscriber.request
            guard !waiter.subscriber.removed else {
                waiter.deliver(result, [])
                continue
            }
            let shape = Shape(target: request.target, fields: request.shape, readable: request.readable)
            if let events = shared[shape] {
                waiter.deliver(result, events)
                continue
            }
            let events: [LiveEvent]
            let audience = Audience(request)
            if let wide = widest[audience] {
                let all = folded[audience] ?? Self.events(replaying: changes, for: wide)
                folded[audience] = all
                events = all.map { $0.cut(to: request.shape) }.filter { !$0.isEmptyChange }
            } else {
                events = Self.events(replaying: changes, for: request)
            }
            shared[shape] = events
            waiter.deliver(result, events)
        }
    }

    /// The events logged changes make for a subscriber, through the same deltas as live ones. A
    /// collection's are folded as they are made into at most one change (its subscriber folds a
    /// replay anyway), so a replay of thousands of changes never holds thousands of events.
    static func events(replaying changes: [CommittedChange], for request: SubscriptionRequest) -> [LiveEvent] {
        var folded: FoldedChange?
        var events: [LiveEvent] = []
        for change in changes {
            guard let delta = ResourceDelta(change, for: request.target, readable: request.readable) else { continue }
            let event = delta.event(seq: change.seq, for: request.shape)
            guard !event.isEmptyChange else { continue }
            if !request.target.isCollection {
                events.append(event)
            } else if folded == nil {
                folded = FoldedChange(event)
            } else {
                folded!.fold(event)
            }
        }
        if let folded {
            let event = folded.event
            if !event.isEmptyChange { events.append(event) }
        }
        return events
    }

}
