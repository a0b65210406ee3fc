/// What one committed write did, resource by resource: the unit the change log records and the
/// live models apply, identified by its `seq` (the event id).
package struct CommittedChange: Sendable {
    package let seq: Int
    package let items: [ChangeItem]
    /// For changes folded into one on the way to the live side: the first of them (else `seq`).
    /// Each item then holds its state before `firstSeq` and after `seq`.
    package let firstSeq: Int

    package init(seq: Int, items: [ChangeItem], firstSeq: Int? = nil) {
        self.seq = seq
        self.items = items
        self.firstSeq = firstSeq ?? seq
    }
}

/// One resource touched by a write: its state afterwards and the names of the fields it set.
package enum ChangeItem: Sendable {
    /// `deleted` carries the last state of a deleted library.
    case library(LibraryRecord, fields: Set<LibraryField>, deleted: Bool)
    /// `before` holds the values of the fields lists filter by, as the book had them before
    /// (nil when this write created it).
    case book(BookRecord, fields: Set<BookField>, before: BookKeys?, deleted: Bool)

    package var key: String {
        switch self {
        case .library(let library, _, _): "library:" + library.id
        case .book(let book, _, _, _): "book:" + book.id
        }
    }

    /// This item followed by `later`, a later change of the same resource in the same write.
    package func merged(with later: ChangeItem) -> ChangeItem {
        switch (self, later) {
        case (.library(_, let a, _), .library(let library, let b, let deleted)):
            .library(library, fields: a.union(b), deleted: deleted)
        case (.book(_, let a, let before, _), .book(let book, let b, _, let deleted)):
            .book(book, fields: a.union(b), before: before, deleted: deleted)
        default:
            later
        }
    }
}

extension FieldRecord {
    /// The fields whose values differ from `old`; every field when there is no `old`.
    @inlinable package func changedFields(from old: Self?) -> Set<Field> {
        guard let old else { return Set(Field.allCases) }
        return Set(Field.allCases.filter { self[$0] != old[$0] })
    }
}
