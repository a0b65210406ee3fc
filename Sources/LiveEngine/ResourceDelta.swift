import LibraryDomain

/// What one committed change did to one watched resource: the fields it changed with their new
/// values, and for a library the books that joined, left or changed.
///
/// Live publishing builds a delta from what Observation reported on the models, replay builds one
/// from the change log, and both turn it into each subscriber's event with `event(seq:for:)`, so
/// the two cut one change alike. Events are also cut elsewhere: folded for a slow reader
/// (`PendingEvents` through `FoldedChange`, for a single stream and a multiplexed watch alike), caught up from a kept snapshot
/// (`KeptSnapshots`), and a replay folded for wider fields cut to a subscriber's
/// (`LiveEvent.cut(to:)`, below), which keeps what `event(seq:for:)` keeps.
struct ResourceDelta {
    /// The resource's id; empty for a collection.
    let id: String
    var isCollection = false
    var deleted = false
    /// The resource's own changed fields, in representation order.
    var libraryFields: [(LibraryField, FieldValue)] = []
    var bookFields: [(BookField, FieldValue)] = []
    /// For a library: books that joined (with every field), left, or changed (with the changed fields).
    var added: [LiveEvent.Member] = []
    var removed: [String] = []
    var changed: [LiveEvent.Member] = []

    init(id: String) {
        self.id = id
    }

    /// The event for subscribers of `shape`: only what they asked for (an empty change when none
    /// of it moved, which is never sent).
    func event(seq: Int, for shape: SubscriptionRequest.Shape) -> LiveEvent {
        if deleted { return LiveEvent(kind: .delete, seq: seq, id: id) }
        var event = LiveEvent(kind: .change, seq: seq, id: id, isCollection: isCollection)
        event.libraryFields = libraryFields.filter { shape.libraryFields.contains($0.0) }
        event.bookFields = bookFields.filter { shape.bookFields.contains($0.0) }
        if shape.members && !(added.isEmpty && removed.isEmpty && changed.isEmpty) {
            let membership = LiveEvent.MembershipChange(added: added, removed: removed, changed: changed)
                .kept(for: shape, isCollection: isCollection)
            if !membership.isEmpty { event.membership = membership }
        }
        return event
    }

    /// The delta a logged change makes for `target`, or nil when it does not concern it, as a
    /// subscriber who may read only the libraries `readable` (nil: every one) sees it: a book moved
    /// out of them is deleted for it, and in a collection the items outside them are not there
    /// (one moved in is `added`, one moved out `removed`). A library's own stream is checked when
    /// it opens: a library never moves.
    init?(_ change: CommittedChange, for target: LiveTarget, readable: Set<String>? = nil) {
        func reads(_ library: String) -> Bool { readable?.contains(library) ?? true }
        switch target {
        case .book(let id):
            for case .book(let book, let fields, _, let deleted) in change.items where book.id == id {
                self.init(id: id)
                self.deleted = deleted || !reads(book.library)
                bookFields = Self.values(fields) { book[$0] }
                return
            }
            return nil
        case .library(let id):
            self.init(id: id)
            var concerned = false
            for item in change.items {
                switch item {
                case .library(let library, let fields, let deleted) where library.id == id:
                    concerned = true
                    self.deleted = deleted
                    libraryFields = Self.values(fields) { library[$0] }
                case .book(let book, let fields, let before, let deleted):
                    let move = MemberMove(
                        previous: before?.library, current: book.library, deleted: deleted, library: id)
                    switch move {
                    case .joined:
                        added.append(.init(id: book.id, fields: Self.values(BookField.all) { book[$0] }))
                    case .left: removed.append(book.id)
                    case .stayed: changed.append(.init(id: book.id, fields: Self.values(fields) { book[$0] }))
                    case .outside: continue
                    }
                    concerned = true
                default:
                    continue
                }
            }
            if !concerned { return nil }
        case .libraries:
            self.init(id: "")
            isCollection = true
            for case .library(let library, let fields, let deleted) in change.items where reads(library.id) {
                if deleted && fields.contains(.id) {
                    continue  // created and deleted within one (folded) change: never seen
                } else if deleted {
                    removed.append(library.id)
                } else if fields.contains(.id) {
                    added.append(
                        .init(id: library.id, libraryFields: Self.values(LibraryField.all) { library[$0] }))
                } else {
                    changed.append(.init(id: library.id, libraryFields: Self.values(fields) { library[$0] }))
                }
            }
            if added.isEmpty && removed.isEmpty && changed.isEmpty { return nil }
        case .books(let filter):
            self.init(id: "")
            isCollection = true
            for case .book(let book, let fields, let before, let deleted) in change.items {
                // Entering or leaving the filter is decided from the change: the filtered values
                // before it and after it.
                // The libraries the subscriber may read narrow the filter alike.
                let was = before.map { filter.matches($0) && reads($0.library) } ?? false
                let isIn = !deleted && filter.matches(book.keys) && reads(book.library)
                switch (was, isIn) {
                case (false, true):
                    added.append(.init(id: book.id, fields: Self.values(BookField.all) { book[$0] }))
                case (true, false): removed.append(book.id)
                case (true, true):
                    changed.append(.init(id: book.id, fields: Self.values(fields) { book[$0] }))
                case (false, false): continue
                }
            }
            if added.isEmpty && removed.isEmpty && changed.isEmpty { return nil }
        case .window:
            return nil  // kept by its `LiveWindow`, never replayed
        }
    }

    /// `fields` (but `id`, which every event carries anyway) with their values, in representation order.
    static func values(_ fields: Set<BookField>, _ value: (BookField) -> FieldValue) -> [(BookField, FieldValue)] {
        BookField.allCases.compactMap { $0 != .id && fields.contains($0) ? ($0, value($0)) : nil }
    }

    static func values(_ fields: Set<LibraryField>, _ value: (LibraryField) -> FieldValue)
        -> [(LibraryField, FieldValue)]
    {
        LibraryField.allCases.compactMap { $0 != .id && fields.contains($0) ? ($0, value($0)) : nil }
    }
}

/// How a book's change moves it relative to one library: the one rule for `added` and `removed`,
/// whether the change comes live from the writer or from the change log.
enum MemberMove {
    case joined, left, stayed, outside

    init(previous: String?, current: String, deleted: Bool, library: String) {
        let was = previous == library
        let isMember = !deleted && current == library
        switch (was, isMember) {
        case (false, true): self = .joined
        case (true, false): self = .left
        case (true, true): self = .stayed
        case (false, false): self = .outside
        }
    }
}

extension BookField {
    /// Every field a book event can carry.
    static let all = Set(allCases).subtracting([.id])
}

extension LibraryField {
    /// Every field a library event can carry.
    static let all = Set(allCases).subtracting([.id])
}

extension LiveEvent {
    /// A change made for wider fields, cut to `shape`'s: what `ResourceDelta.event(seq:for:)`
    /// keeps of a change for `shape`, applied to a change folded for more fields (a replay's). A
    /// changed member left with no field asked for goes; added and removed members stay.
    func cut(to shape: SubscriptionRequest.Shape) -> LiveEvent {
        var event = self
        event.libraryFields = libraryFields.filter { shape.libraryFields.contains($0.0) }
        event.bookFields = bookFields.filter { shape.bookFields.contains($0.0) }
        guard var membership, shape.members else {
            event.membership = nil
            return event
        }
        membership = membership.kept(for: shape, isCollection: isCollection)
        event.membership = membership.isEmpty ? nil : membership
        return event
    }
}

extension LiveEvent.MembershipChange {
    /// What subscribers of `shape` see of it: each member with the fields they asked for (a
    /// collection of libraries lists library fields; a library's `books` and a collection of
    /// books list book fields), and no changed member left with none.
    func kept(for shape: SubscriptionRequest.Shape, isCollection: Bool) -> Self {
        let memberLibraryFields = isCollection ? shape.libraryFields : []
        func requested(_ member: LiveEvent.Member) -> LiveEvent.Member {
            var kept = member
            kept.fields = member.fields.filter { shape.bookFields.contains($0.0) }
            kept.libraryFields = member.libraryFields.filter { memberLibraryFields.contains($0.0) }
            return kept
        }
        var kept = self
        kept.added = added.map(requested)
        kept.changed = changed.compactMap { member in
            let member = requested(member)
            return member.isEmpty ? nil : member
        }
        return kept
    }
}
