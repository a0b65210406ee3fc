import Dispatch
import LibraryDomain

/// A library's snapshot events kept for the subscribers who join later, and what changed in the
/// library since they were taken.
///
/// A later subscriber gets a kept snapshot, with its own (older) id, then one change that brings
/// it up to date, made from what this records: the same two steps as a slow reader's snapshot
/// followed by its folded changes. Building a snapshot afresh walks every member on the live actor
/// (a million members take it about half a second, with every other stream waiting) and encodes
/// it again; under a steady stream of writes every join would pay that, since every write makes
/// the last snapshot old.
///
/// Nor does a kept snapshot grow old: once a sixty-fourth of the library has been touched since
/// it was taken, it is refreshed (`refresh(_:at:)`): the catch-up is made on the actor, as for a
/// joining subscriber, and applied to the kept snapshot's member table on another thread, one pass
/// over the table; the refreshed snapshot replaces the old one when it is done. Only when the
/// refreshes cannot keep up (a sixteenth of the library touched) do the snapshots go.
///
/// What is recorded comes from Observation, like every live event, so a kept snapshot is only as
/// good as the fields its shape's subscribers keep armed: one is kept only while somebody of its
/// shape is still subscribed (`keep(only:)`).
struct KeptSnapshots {
    /// The kept snapshots by shape, all exact at `changes.seq` (the latest of their ids: nothing
    /// changed in the library between theirs and it).
    private var events: [SubscriptionRequest.Shape: LiveEvent] = [:]
    /// What changed in the library since the snapshots' `seq`.
    private var changes = Changes(seq: 0)
    /// While a refresh is under way: what changed since the id the snapshots are refreshed to.
    private var refreshing: Changes?
    /// Counts what made the snapshots go: a refresh begun before then is not installed.
    private var generation = 0

    /// A refresh begins once more members than this have been touched since the snapshots' id;
    /// the snapshots go at `limit`. Low in debug builds, so that the tests' small libraries refresh.
    #if DEBUG
        static let refreshFloor = 16
    #else
        static let refreshFloor = 256
    #endif

    var isEmpty: Bool { events.isEmpty }

    subscript(shape: SubscriptionRequest.Shape) -> LiveEvent? { events[shape] }

    /// Keeps `event`, a snapshot just taken; the others go unless they are exact at its id too.
    mutating func keep(_ event: LiveEvent, for shape: SubscriptionRequest.Shape) {
        if !changes.isEmpty { removeAll() }
        cancelRefresh()  // it would bring the others to an id this one may not be exact at
        events[shape] = event
        changes.seq = max(changes.seq, event.seq)
    }

    /// Drops the snapshots of shapes nobody is subscribed with any more (their fields may no longer
    /// be observed, so what changed in them would not be recorded).
    mutating func keep(only shapes: some Sequence<SubscriptionRequest.Shape>) {
        let wanted = Set(shapes)
        events = events.filter { wanted.contains($0.key) }
        if events.isEmpty { removeAll() }
    }

    mutating func removeAll() {
        events = [:]
        changes = Changes(seq: 0)
        cancelRefresh()
    }

    private mutating func cancelRefresh() {
        refreshing = nil
        generation += 1
    }

    /// Records what one published change did to `library`; true when the kept snapshots are due
    /// for a refresh (`refresh(_:at:)`).
    @LiveActor
    mutating func note(_ library: LiveLibrary) -> Bool {
        guard !events.isEmpty else { return false }
        changes.note(library)
        refreshing?.note(library)
        let size = library.members.count
        if changes.count > max(1_000, size / 16) {
            removeAll()  // a new snapshot costs less than the catch-up now; they also hold memory
            return false
        }
        return refreshing == nil && changes.count > max(Self.refreshFloor, size / 64)
    }

    /// The change that brings a kept snapshot of `library` up to its state at `current`, as the
    /// subscribers of `shape` see it; nil when nothing they asked for changed.
    @LiveActor
    func catchUp(_ library: LiveLibrary, to current: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent? {
        changes.catchUp(library, to: current, for: shape)
    }

    /// Begins bringing every kept snapshot of `library` (whose `snapshots` this is) up to `seq`,
    /// the change just published: their catch-ups are made here, and applied to the snapshots on
    /// another thread.
    @LiveActor
    mutating func refresh(_ library: LiveLibrary, at seq: Int) {
        guard refreshing == nil, !events.isEmpty, seq > changes.seq else { return }
        let work = events.map { shape, event in
            let change = changes.catchUp(library, to: seq, for: shape)
            let orders = change?.membership?.added.map { library.members[$0.id]?.order ?? .max } ?? []
            return Refresh(shape: shape, event: event, change: change, addedOrders: orders)
        }
        refreshing = Changes(seq: seq)
        let generation = generation
        DispatchQueue.global(qos: .utility).async {
            let refreshed = work.map { ($0.shape, $0.refreshed(at: seq)) }
            LiveActor.enqueue { library.snapshots.install(refreshed, generation: generation) }
        }
    }

    /// Puts refreshed snapshots in place of the old ones, unless the snapshots went meanwhile.
    private mutating func install(_ refreshed: [(SubscriptionRequest.Shape, LiveEvent)], generation: Int) {
        guard generation == self.generation, let since = refreshing else { return }
        for (shape, event) in refreshed where events[shape] != nil { events[shape] = event }
        changes = since
        refreshing = nil
    }

    /// One kept snapshot to refresh: it, and the change since (nil: nothing its shape asked for).
    private struct Refresh: Sendable {
        let shape: SubscriptionRequest.Shape
        let event: LiveEvent
        let change: LiveEvent?
        let addedOrders: [Int]

        /// The snapshot at `seq`; off the live actor.
        func refreshed(at seq: Int) -> LiveEvent {
            // Unchanged for its subscribers: still exact, and already encoded.
            guard let change else { return event }
            var next = LiveEvent(kind: .snapshot, seq: seq, id: event.id)
            next.libraryFields = event.libraryFields.map { field, value in
                (field, change.libraryFields.first { $0.0 == field }?.1 ?? value)
            }
            next.members = event.members.map {
                $0.applying(change.membership ?? .init(), addedOrders: addedOrders)
            }
            return next
        }
    }

    /// What changed in a library since `seq`: enough to bring a snapshot taken at `seq` up to date.
    private struct Changes {
        var seq: Int
        /// The library's own fields that changed.
        private var libraryFields: Set<LibraryField> = []
        /// The members touched: where each is in `order`.
        private var touched: [String: Int] = [:]
        /// The members touched, in the order they were first touched: whether each was a member at
        /// `seq`, and the fields that changed (all of them once it left or joined meanwhile), a bit
        /// per field (`1 << rawValue`), so that noting a change allocates nothing.
        private var order: [(id: String, wasMember: Bool, fields: UInt64)] = []
        private static let allFields = BookField.all.reduce(UInt64(0)) { $0 | 1 << $1.rawValue }

        init(seq: Int) {
            self.seq = seq
        }

        var isEmpty: Bool { libraryFields.isEmpty && touched.isEmpty }

        /// Members touched.
        var count: Int { order.count }

        /// Records what one published change did to `library`.
        @LiveActor
        mutating func note(_ library: LiveLibrary) {
            libraryFields.formUnion(library.dirty)
            for book in library.changedMembers {
                let fields = book.dirty.reduce(UInt64(0)) { $0 | 1 << $1.rawValue }
                if let index = touched[book.id] {
                    order[index].fields |= fields
                } else {
                    touch(book.id, wasMember: true, fields: fields)
                }
            }
            for book in library.joined { moved(book.id, wasMember: false) }
            for id in library.left { moved(id, wasMember: true) }
        }

        /// A member that left or joined: all its fields are sent again, whatever happened meanwhile.
        private mutating func moved(_ id: String, wasMember: Bool) {
            if let index = touched[id] {
                order[index].fields = Self.allFields
            } else {
                touch(id, wasMember: wasMember, fields: Self.allFields)
            }
        }

        private mutating func touch(_ id: String, wasMember: Bool, fields: UInt64) {
            touched[id] = order.count
            order.append((id, wasMember, fields))
        }

        /// The change from `seq` to `current` for the subscribers of `shape`; nil when nothing
        /// they asked for changed.
        @LiveActor
        func catchUp(_ library: LiveLibrary, to current: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent? {
            guard current > seq, !isEmpty else { return nil }
            // Only what the subscribers of `shape` asked for, so the delta needs no second pass.
            let wanted =
                shape.members ? shape.bookFields.reduce(UInt64(0)) { $0 | 1 << $1.rawValue } & Self.allFields : 0
            var delta = ResourceDelta(id: library.id)
            delta.libraryFields = ResourceDelta.values(libraryFields.intersection(shape.libraryFields)) { library[$0] }
            for (id, wasMember, fields) in order {
                switch (wasMember, library.members[id]) {
                case (true, let book?):
                    guard fields & wanted != 0 else { continue }
                    delta.changed.append(.init(id: id, fields: Self.values(of: book, fields & wanted)))
                case (true, nil):
                    if shape.members { delta.removed.append(id) }
                case (false, let book?):
                    if shape.members { delta.added.append(.init(id: id, fields: Self.values(of: book, wanted))) }
                case (false, nil):
                    continue  // joined and left again
                }
            }
            let event = delta.event(seq: current, for: shape)
            return event.isEmptyChange ? nil : event
        }

        /// The values of the fields in `mask`, in representation order.
        @LiveActor
        private static func values(of book: LiveBook, _ mask: UInt64) -> [(BookField, FieldValue)] {
            var values: [(BookField, FieldValue)] = []
            values.reserveCapacity(mask.nonzeroBitCount)
            for field in BookField.allCases where mask & 1 << field.rawValue != 0 {
                values.append((field, book[field]))
            }
            return values
        }
    }
}
