import LibraryDomain

/// What one committed change did to one watched resource: the fields it changed with their new
/// values, and for a library the books that joined, left or changed.
///
/// The one place events are cut from: live publishing builds a delta from what Observation
/// reported on the models, replay builds one from the change log, and both turn it into each
/// subscriber's event with `event(seq:for:)`, so the two can never disagree.
struct ResourceDelta {
    let id: String
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
        var event = LiveEvent(kind: .change, seq: seq, id: id)
        event.libraryFields = libraryFields.filter { shape.libraryFields.contains($0.0) }
        event.bookFields = bookFields.filter { shape.bookFields.contains($0.0) }
        if shape.members && !(added.isEmpty && removed.isEmpty && changed.isEmpty) {
            var membership = LiveEvent.MembershipChange()
            membership.added = added.map {
                .init(id: $0.id, fields: $0.fields.filter { shape.bookFields.contains($0.0) })
            }
            membership.removed = removed
            membership.changed = changed.compactMap { member in
                let fields = member.fields.filter { shape.bookFields.contains($0.0) }
                return fields.isEmpty ? nil : .init(id: member.id, fields: fields)
            }
            if !membership.isEmpty { event.membership = membership }
        }
        return event
    }

    /// The delta a logged change makes for `target`, or nil when it does not concern it.
    init?(_ change: CommittedChange, for target: LiveTarget) {
        switch target {
        case .book(let id):
            for case .book(let book, let fields, _, let deleted) in change.items where book.id == id {
                self.init(id: id)
                self.deleted = deleted
                bookFields = Self.values(fields) { book.value(of: $0) }
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
                    libraryFields = Self.values(fields) { library.value(of: $0) }
                case .book(let book, let fields, let previous, let deleted):
                    let move = MemberMove(previous: previous, current: book.libraryId, deleted: deleted, library: id)
                    switch move {
                    case .joined:
                        added.append(.init(id: book.id, fields: Self.values(BookField.all) { book.value(of: $0) }))
                    case .left: removed.append(book.id)
                    case .stayed: changed.append(.init(id: book.id, fields: Self.values(fields) { book.value(of: $0) }))
                    case .outside: continue
                    }
                    concerned = true
                default:
                    continue
                }
            }
            if !concerned { return nil }
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
