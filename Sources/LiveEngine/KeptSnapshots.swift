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
/// Nor does a kept snapshot grow old: once a thirty-second of the library has been touched since
/// it was taken, it is refreshed (`refresh(_:at:)`) on another thread, from what was recorded: the
/// catch-up of each shape, applied to its snapshot's member table. What is recorded holds the
/// members' values as they were noted, so neither a catch-up nor a refresh reads the models, and
/// the live actor only notes changes and swaps the refreshed snapshots in. Only when refreshes
/// cannot keep up (a sixteenth of the library touched) do the snapshots go.
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
    /// Whether a later subscriber got a kept snapshot since the last refresh: while they keep
    /// coming, a refreshed one is encoded as soon as it is made rather than by the next of them
    /// (`refresh(_:at:encodeAhead:)`); when none came, encoding it could be wasted.
    private var joinedSinceRefresh = false

    /// A refresh begins once more members than this (or than a thirty-second of the library) have
    /// been touched since the snapshots' id; the snapshots go past a sixteenth (`note`). Low in
    /// debug builds, so that the tests' small libraries refresh.
    #if DEBUG
        static let refreshFloor = 16
    #else
        static let refreshFloor = 256
    #endif

    var isEmpty: Bool { events.isEmpty }

    subscript(shape: SubscriptionRequest.Shape) -> LiveEvent? { events[shape] }

    /// Notes that a later subscriber got a kept snapshot (one taken before it came).
    mutating func noteJoin() { joinedSinceRefresh = true }

    /// Keeps `event`, a snapshot just taken; the others go unless they are exact at its id too.
    mutating func keep(_ event: LiveEvent, for shape: SubscriptionRequest.Shape) {
        if !changes.isEmpty { removeAll() }
        cancelRefresh()  // it would bring the others to an id this one may not be exact at
        if let old = events.updateValue(event, forKey: shape) { Self.release([old]) }
        changes.seq = max(changes.seq, event.seq)
    }

    /// Drops the snapshots of shapes nobody is subscribed with any more (their fields may no longer
    /// be observed, so what changed in them would not be recorded).
    mutating func keep(only shapes: some Sequence<SubscriptionRequest.Shape>) {
        let wanted = Set(shapes)
        var dropped: [LiveEvent] = []
        for shape in events.keys where !wanted.contains(shape) { dropped.append(events.removeValue(forKey: shape)!) }
        Self.release(dropped)
        if events.isEmpty { removeAll() }
    }

    mutating func removeAll() {
        Self.release(Array(events.values))
        events = [:]
        changes = Changes(seq: 0)
        cancelRefresh()
    }

    /// Lets go of snapshots on another thread: the last reference to a million members' table
    /// releases a million strings, which would hold up the live actor for a tenth of a second.
    private static func release(_ dropped: [LiveEvent]) {
        guard !dropped.isEmpty else { return }
        DispatchQueue.global(qos: .utility).async { withExtendedLifetime(dropped) {} }
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
        return refreshing == nil && changes.count > max(Self.refreshFloor, size / 32)
    }

    /// The change that brings a kept snapshot of library `id` up to its state at `current`, as the
    /// subscribers of `shape` see it; nil when nothing they asked for changed.
    func catchUp(_ id: String, to current: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent? {
        changes.catchUp(id, to: current, for: shape)
    }

    /// Begins bringing every kept snapshot of `library` (whose `snapshots` this is) up to `seq`,
    /// the change just published, on another thread, from what was recorded. When a later
    /// subscriber joined since the last refresh, the refreshed snapshots are then handed to
    /// `encodeAhead`, so that the next joiner does not wait for their encoding.
    @LiveActor
    mutating func refresh(
        _ library: LiveLibrary, at seq: Int, encodeAhead: @escaping @Sendable @LiveActor ([LiveEvent]) -> Void
    ) {
        guard refreshing == nil, !events.isEmpty, seq > changes.seq else { return }
        let (kept, since, id, generation) = (events, changes, library.id, generation)
        refreshing = Changes(seq: seq)
        DispatchQueue.global(qos: .utility).async {
            let refreshed = kept.map { shape, event in (shape, since.refreshed(event, of: id, at: seq, for: shape)) }
            LiveActor.enqueue {
                guard library.snapshots.install(refreshed, generation: generation) else { return }
                guard library.snapshots.joinedSinceRefresh else { return }
                library.snapshots.joinedSinceRefresh = false
                // Those made anew (one whose subscribers saw no change is as it was, encoded).
                encodeAhead(refreshed.map(\.1).filter { $0.seq == seq })
            }
        }
    }

    /// Puts refreshed snapshots in place of the old ones, unless the snapshots went meanwhile.
    private mutating func install(_ refreshed: [(SubscriptionRequest.Shape, LiveEvent)], generation: Int) -> Bool {
        guard generation == self.generation, let since = refreshing else {
            Self.release(refreshed.map(\.1))
            return false
        }
        var replaced: [LiveEvent] = []
        for (shape, event) in refreshed where events[shape] != nil {
            replaced.append(events.updateValue(event, forKey: shape)!)
        }
        Self.release(replaced)
        changes = since
        refreshing = nil
        return true
    }

    /// What changed in a library since `seq`, with the values it changed to: enough to bring a
    /// snapshot taken at `seq` up to date without reading the models.
    private struct Changes {
        /// A member touched since `seq`.
        struct Entry {
            let id: String
            /// Whether it was a member at `seq`, and is one now.
            let wasMember: Bool
            var isMember: Bool
            /// Its insertion order (where it goes among the members).
            var order: Int
            /// The fields that changed (all of them once it joined), a bit per field
            /// (`1 << rawValue`), and their latest values, by field.
            var fields: UInt64
            var values: [FieldValue]
        }

        var seq: Int
        /// The library's own fields that changed, with their latest values.
        private var libraryValues: [LibraryField: FieldValue] = [:]
        /// The members touched: where each is in `entries`.
        private var touched: [String: Int] = [:]
        /// The members touched, in the order they were first touched.
        private var entries: [Entry] = []
        private static let allFields = BookField.all.reduce(UInt64(0)) { $0 | 1 << $1.rawValue }
        private static let blank = [FieldValue](repeating: .null, count: BookField.allCases.count)

        init(seq: Int) {
            self.seq = seq
        }

        var isEmpty: Bool { libraryValues.isEmpty && touched.isEmpty }

        /// Members touched.
        var count: Int { entries.count }

        /// Records what one published change did to `library`.
        @LiveActor
        mutating func note(_ library: LiveLibrary) {
            for field in library.dirty { libraryValues[field] = library[field] }
            for book in library.changedMembers {
                note(book, fields: book.dirty.reduce(UInt64(0)) { $0 | 1 << $1.rawValue }, wasMember: true)
            }
            for book in library.joined { note(book, fields: Self.allFields, wasMember: false) }
            for id in library.left {
                if let index = touched[id] {
                    entries[index].isMember = false
                } else {
                    touched[id] = entries.count
                    entries.append(
                        Entry(id: id, wasMember: true, isMember: false, order: 0, fields: 0, values: Self.blank))
                }
            }
        }

        /// Records `fields` of `book`, a member now.
        @LiveActor
        private mutating func note(_ book: LiveBook, fields: UInt64, wasMember: Bool) {
            let index: Int
            if let known = touched[book.id] {
                index = known
            } else {
                index = entries.count
                touched[book.id] = index
                entries.append(
                    Entry(id: book.id, wasMember: wasMember, isMember: true, order: 0, fields: 0, values: Self.blank))
            }
            entries[index].isMember = true
            entries[index].order = book.order
            entries[index].fields |= fields
            for field in BookField.allCases where fields & 1 << field.rawValue != 0 {
                entries[index].values[field.rawValue] = book[field]
            }
        }

        /// The insertion order of a member touched and a member now.
        func order(of id: String) -> Int { touched[id].map { entries[$0].order } ?? 0 }

        /// The change from `seq` to `current` for the subscribers of `shape` of library `id`; nil
        /// when nothing they asked for changed.
        func catchUp(_ id: String, to current: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent? {
            guard current > seq, !isEmpty else { return nil }
            // Only what the subscribers of `shape` asked for, so the delta needs no second pass.
            let wanted =
                shape.members ? shape.bookFields.reduce(UInt64(0)) { $0 | 1 << $1.rawValue } & Self.allFields : 0
            var delta = ResourceDelta(id: id)
            delta.libraryFields = ResourceDelta.values(Set(libraryValues.keys).intersection(shape.libraryFields)) {
                libraryValues[$0] ?? .null
            }
            for entry in entries {
                switch (entry.wasMember, entry.isMember) {
                case (true, true):
                    guard entry.fields & wanted != 0 else { continue }
                    delta.changed.append(.init(id: entry.id, fields: Self.values(of: entry, entry.fields & wanted)))
                case (true, false):
                    if shape.members { delta.removed.append(entry.id) }
                case (false, true):
                    if shape.members { delta.added.append(.init(id: entry.id, fields: Self.values(of: entry, wanted))) }
                case (false, false):
                    continue  // joined and left again
                }
            }
            let event = delta.event(seq: current, for: shape)
            return event.isEmptyChange ? nil : event
        }

        /// `event`, a snapshot of library `id` for `shape` exact at `seq`, brought up to `current`
        /// (itself when nothing its subscribers asked for changed: still exact, still encoded).
        func refreshed(_ event: LiveEvent, of id: String, at current: Int, for shape: SubscriptionRequest.Shape)
            -> LiveEvent
        {
            guard let change = catchUp(id, to: current, for: shape) else { return event }
            var next = LiveEvent(kind: .snapshot, seq: current, id: event.id)
            next.libraryFields = event.libraryFields.map { field, value in
                (field, change.libraryFields.first { $0.0 == field }?.1 ?? value)
            }
            next.members = event.members.map { $0.applying(change.membership ?? .init(), orders: order(of:)) }
            return next
        }

        /// The values of the fields in `mask`, in representation order.
        private static func values(of entry: Entry, _ mask: UInt64) -> [(BookField, FieldValue)] {
            var values: [(BookField, FieldValue)] = []
            values.reserveCapacity(mask.nonzeroBitCount)
            for field in BookField.allCases where mask & 1 << field.rawValue != 0 {
                values.append((field, entry.values[field.rawValue]))
            }
            return values
        }
    }
}
