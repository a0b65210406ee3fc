import LibraryDomain

/// Changes waiting for a slow reader, folded into one: per field the latest value, per member the
/// latest state, and the latest id. Folding in a change costs time for what that change carries,
/// never for what already waits, and the fold never holds more than one entry per field and member.
struct FoldedChange {
    private enum MemberState {
        case added([BookField: FieldValue])
        case changed([BookField: FieldValue])
        case removed
    }

    let id: String
    private(set) var seq: Int
    private var libraryFields: [LibraryField: FieldValue] = [:]
    private var bookFields: [BookField: FieldValue] = [:]
    private var members: [String: MemberState] = [:]
    /// Member ids in the order they first appeared (ids whose changes cancelled out are skipped).
    private var order: [String] = []

    init(_ event: LiveEvent) {
        id = event.id
        seq = event.seq
        fold(event)
    }

    /// Folds in a later change, so the result still moves the client from what it last saw to now.
    mutating func fold(_ later: LiveEvent) {
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
            let fields = Dictionary(member.fields, uniquingKeysWith: { $1 })
            if case .removed = members[member.id] {
                members[member.id] = .changed(fields)  // it left and came back: the client still has it
            } else {
                set(member.id, .added(fields))
            }
        }
        for member in membership.changed {
            let fields = Dictionary(member.fields, uniquingKeysWith: { $1 })
            switch members[member.id] {
            case .added(let earlier): members[member.id] = .added(earlier.merging(fields) { $1 })
            case .changed(let earlier): members[member.id] = .changed(earlier.merging(fields) { $1 })
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
    var event: LiveEvent {
        var event = LiveEvent(kind: .change, seq: seq, id: id)
        event.libraryFields = LibraryField.allCases.compactMap { field in libraryFields[field].map { (field, $0) } }
        event.bookFields = BookField.allCases.compactMap { field in bookFields[field].map { (field, $0) } }
        guard !members.isEmpty else { return event }
        func member(_ id: String, _ fields: [BookField: FieldValue]) -> LiveEvent.Member {
            .init(id: id, fields: BookField.allCases.compactMap { field in fields[field].map { (field, $0) } })
        }
        var membership = LiveEvent.MembershipChange()
        var listed: Set<String> = []
        for id in order where listed.insert(id).inserted {
            switch members[id] {
            case .added(let fields): membership.added.append(member(id, fields))
            case .changed(let fields): membership.changed.append(member(id, fields))
            case .removed: membership.removed.append(id)
            case nil: continue
            }
        }
        if !membership.isEmpty { event.membership = membership }
        return event
    }
}
