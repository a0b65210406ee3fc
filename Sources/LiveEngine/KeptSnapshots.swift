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
/// What is recorded comes from Observation, like every live event, so a kept snapshot is only as
/// good as the fields its shape's subscribers keep armed: one is kept only while somebody of its
/// shape is still subscribed (`keep(only:)`).
struct KeptSnapshots {
    /// The kept snapshots by shape, all exact at `seq` (the latest of their ids: nothing changed in
    /// the library between theirs and it).
    private var events: [SubscriptionRequest.Shape: LiveEvent] = [:]
    private var seq = 0
    /// The library's own fields that changed since `seq`.
    private var libraryFields: Set<LibraryField> = []
    /// The members touched since `seq`: where each is in `order`.
    private var touched: [String: Int] = [:]
    /// The members touched since `seq`, in the order they were first touched: whether each was a
    /// member at `seq`, and the fields that changed (all of them once it left or joined meanwhile),
    /// a bit per field (`1 << rawValue`), so that noting a change allocates nothing.
    private var order: [(id: String, wasMember: Bool, fields: UInt64)] = []
    private static let allFields = BookField.all.reduce(UInt64(0)) { $0 | 1 << $1.rawValue }

    var isEmpty: Bool { events.isEmpty }

    subscript(shape: SubscriptionRequest.Shape) -> LiveEvent? { events[shape] }

    /// Keeps `event`, a snapshot just taken; the others go unless they are exact at its id too.
    mutating func keep(_ event: LiveEvent, for shape: SubscriptionRequest.Shape) {
        if !libraryFields.isEmpty || !touched.isEmpty { removeAll() }
        events[shape] = event
        seq = max(seq, event.seq)
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
        seq = 0
        libraryFields = []
        touched = [:]
        order = []
    }

    /// Records what one published change did to `library`. Once more members have been touched
    /// than a sixteenth of the library (at least a thousand), a new snapshot costs the live actor
    /// less than the catch-up would, and the kept ones go (they also hold the snapshots' memory).
    @LiveActor
    mutating func note(_ library: LiveLibrary) {
        guard !events.isEmpty else { return }
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
        if order.count > max(1_000, library.members.count / 16) { removeAll() }
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

    /// The change that brings a kept snapshot of `library` up to its state at `current`, as the
    /// subscribers of `shape` see it; nil when nothing they asked for changed.
    @LiveActor
    func catchUp(_ library: LiveLibrary, to current: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent? {
        guard current > seq, !libraryFields.isEmpty || !touched.isEmpty else { return nil }
        // Only what the subscribers of `shape` asked for, so the delta needs no second pass.
        let wanted = shape.members ? shape.bookFields.reduce(UInt64(0)) { $0 | 1 << $1.rawValue } & Self.allFields : 0
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
        for field in BookField.allCases where mask & 1 << field.rawValue != 0 { values.append((field, book[field])) }
        return values
    }
}
