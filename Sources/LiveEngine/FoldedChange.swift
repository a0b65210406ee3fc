import LibraryDomain

/// Changes waiting for a slow reader, folded into one: per field the latest value, per member the
/// latest state, and the latest id. Folding in a change costs time for what that change carries,
/// never for what already waits, and the fold never holds more than one entry per field and member.
package struct FoldedChange {
    /// A member's latest values: book fields, or library fields for `/libraries/events`.
    private struct Values {
        var book: [BookField: FieldValue] = [:]
        var library: [LibraryField: FieldValue] = [:]

        init(_ member: LiveEvent.Member) {
            book = Dictionary(member.fields, uniquingKeysWith: { $1 })
            library = Dictionary(member.libraryFields, uniquingKeysWith: { $1 })
        }

        func merging(_ later: Values) -> Values {
            var merged = self
            merged.book.merge(later.book) { $1 }
            merged.library.merge(later.library) { $1 }
            return merged
        }
    }

    private enum MemberState {
        case added(Values)
        case changed(Values)
        case removed
    }

    let id: String
    let isCollection: Bool
    private(set) var seq: Int
    private var libraryFields: [LibraryField: FieldValue] = [:]
    private var bookFields: [BookField: FieldValue] = [:]
    private var members: [String: MemberState] = [:]
    /// Member ids in the order they first appeared (ids whose changes cancelled out are skipped).
    private var order: [String] = []

    package init(_ event: LiveEvent) {
        id = event.id
        isCollection = event.isCollection
        seq = event.seq
        fold(event)
    }

    /// Folds in a later change, so the result still moves the client from what it last saw to now.
    package mutating func fold(_ later: LiveEvent) {
        seq = later.seq
        for (field, value) in later.libraryFields { libraryFields[field] = value }
        for (field, value) in later.bookFields { bookFields[field] = value }
        guard let membership = later.membership else { return }
        for member in membership.removed {
            if case .added = members[member] {
                members[member] = nil  // never seen by the client: nothing to remove
            } else {
                set(member, .removed)
            }
        }
        for member in membership.added {
            let fields = Values(member)
            if case .removed = members[member.id] {
                members[member.id] = .changed(fields)  // it left and came back: the client still has it
            } else {
                set(member.id, .added(fields))
            }
        }
        for member in membership.changed {
            let fields = Values(member)
            switch members[member.id] {
            case .added(let earlier): members[member.id] = .added(earlier.merging(fields))
            case .changed(let earlier): members[member.id] = .changed(earlier.merging(fields))
            case .removed, nil: set(member.id, .changed(fields))
            }
        }
        if order.count > 2 * members.count + 64 { order = order.filter { members[$0] != nil } }
    }

    private mutating func set(_ member: String, _ state: MemberState) {
        if members[member] == nil { order.append(member) }
        members[member] = state
    }

    /// The folded change as one event, fields in representation order.
    package var event: LiveEvent {
        var event = LiveEvent(kind: .change, seq: seq, id: id, isCollection: isCollection)
        event.libraryFields = LibraryField.allCases.compactMap { field in libraryFields[field].map { (field, $0) } }
        event.bookFields = BookField.allCases.compactMap { field in bookFields[field].map { (field, $0) } }
        guard !members.isEmpty else { return event }
        func member(_ id: String, _ values: Values) -> LiveEvent.Member {
            var member = LiveEvent.Member(
                id: id, fields: BookField.allCases.compactMap { field in values.book[field].map { (field, $0) } })
            member.libraryFields = LibraryField.allCases.compactMap { field in values.library[field].map { (field, $0) }
            }
            return member
        }
        var membership = LiveEvent.MembershipChange()
        var listed: Set<String> = []
        for id in order where listed.insert(id).inserted {
            switch members[id] {
            case .added(let fields): membership.added.append(member(id, fields))
            case .changed(let fields):
                // Nothing to show (a member that left and came back, with no requested field).
                if fields.book.isEmpty && fields.library.isEmpty { continue }
                membership.changed.append(member(id, fields))
            case .removed: membership.removed.append(id)
            case nil: continue
            }
        }
        if !membership.isEmpty { event.membership = membership }
        return event
    }
}
