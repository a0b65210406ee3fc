import LibraryDomain

/// The subscribers of one resource, grouped by what they asked for, and how many want each field.
///
/// A change is turned into one event per group, encoded once, then handed to each of the group's
/// subscribers: the cost follows the subscribers who asked for what changed.
@LiveActor
final class Audience {
    private(set) var groups: [SubscriptionRequest.Shape: [Int: Subscriber]] = [:]
    private(set) var count = 0
    /// For a book: its fields; for a library: its members' fields.
    private(set) var bookFields: [BookField: Int] = [:]
    private(set) var libraryFields: [LibraryField: Int] = [:]
    private(set) var members = 0

    var isEmpty: Bool { count == 0 }
    var subscribers: some Sequence<Subscriber> { groups.values.lazy.flatMap(\.values) }

    /// Adds `subscriber`, counting the fields it wants.
    func add(_ subscriber: Subscriber) {
        let request = subscriber.request
        groups[request.shape, default: [:]][subscriber.id] = subscriber
        count += 1
        let wantsBookFields = request.target.isBook || request.members
        for field in request.bookFields where wantsBookFields { bookFields[field, default: 0] += 1 }
        for field in request.libraryFields where !request.target.isBook { libraryFields[field, default: 0] += 1 }
        if request.members { members += 1 }
    }

    /// The subscriber `id`, if it is here.
    func subscriber(_ id: Int) -> Subscriber? {
        for group in groups.values { if let subscriber = group[id] { return subscriber } }
        return nil
    }

    /// Removes the subscriber `id`, if it is here, and returns it.
    func remove(_ id: Int) -> Subscriber? {
        guard let shape = groups.first(where: { $0.value[id] != nil })?.key,
            let subscriber = groups[shape]?.removeValue(forKey: id)
        else { return nil }
        if groups[shape]?.isEmpty == true { groups[shape] = nil }
        count -= 1
        let request = subscriber.request
        for field in request.bookFields where request.target.isBook || request.members {
            bookFields[field, default: 1] -= 1
            if bookFields[field] == 0 { bookFields[field] = nil }
        }
        for field in request.libraryFields where !request.target.isBook {
            libraryFields[field, default: 1] -= 1
            if libraryFields[field] == 0 { libraryFields[field] = nil }
        }
        if request.members { members -= 1 }
        return subscriber
    }

    /// Hands each group its event for `delta` (built once per group), skipping groups that asked
    /// for nothing it changed. Returns how many subscribers got one.
    func deliver(_ delta: ResourceDelta, seq: Int, firstSeq: Int? = nil) -> Int {
        deliver(seq: seq, firstSeq: firstSeq) { _ in delta }
    }

    /// As `deliver(_:seq:firstSeq:)`, with the delta each group's readable libraries make
    /// (`delta(shape.readable)`, nil when the change does not concern them): a collection's
    /// groups differ in what they may see.
    func deliver(seq: Int, firstSeq: Int? = nil, delta: (Set<String>?) -> ResourceDelta?) -> Int {
        var delivered = 0
        for (shape, subscribers) in groups {
            guard let delta = delta(shape.readable) else { continue }
            var event = delta.event(seq: seq, for: shape)
            if let firstSeq, firstSeq < seq { event.foldedFrom = firstSeq }
            guard !event.isEmptyChange else { continue }
            for subscriber in subscribers.values { subscriber.deliver(event) }
            delivered += subscribers.count
        }
        return delivered
    }

    /// Takes every subscriber out (the resource was deleted, or the server stops).
    func removeAll() -> [Subscriber] {
        let all = Array(subscribers)
        groups = [:]
        count = 0
        bookFields = [:]
        libraryFields = [:]
        members = 0
        return all
    }
}

extension LiveTarget {
    var isBook: Bool {
        if case .book = self { return true }
        return false
    }
}
