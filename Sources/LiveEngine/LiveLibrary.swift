import LibraryDomain
import Observation

/// A library that somebody watches, as an observable model, with its books as live members.
///
/// Members are kept by id, so a book joining or leaving costs the same in a library of ten books
/// or of a million; their order (for snapshots) is worked out only when a snapshot needs it.
@LiveActor
@Observable
package final class LiveLibrary {
    /// The library's values. Read one field at a time through `self[field]`, which Observation
    /// tracks per field (the key path `\.[field]`); never observed as a whole.
    @ObservationIgnored private var record: LibraryRecord
    /// The member books by id. Tracking it tracks the membership.
    var members: [String: LiveBook]

    /// The latest change this model already reflects: older ones, still on their way, are skipped.
    @ObservationIgnored var baseSeq: Int
    @ObservationIgnored var armed: Set<LibraryField> = []
    @ObservationIgnored var membersArmed = false
    /// What the change being applied did, not yet published.
    @ObservationIgnored var dirty: Set<LibraryField> = []
    @ObservationIgnored var joined: [LiveBook] = []
    @ObservationIgnored var left: [String] = []
    @ObservationIgnored var changedMembers: [LiveBook] = []
    /// Whether it is in the hub's list of libraries to publish for this change.
    @ObservationIgnored var touched = false
    /// The members in insertion order, until the membership next changes.
    @ObservationIgnored private var ordered: [LiveBook]?
    /// Snapshot events kept for later subscribers, and what changed since they were taken.
    @ObservationIgnored var snapshots = KeptSnapshots()

    /// `members` by id, and in insertion order (`ordered`).
    init(_ record: LibraryRecord, members: [String: LiveBook], ordered: [LiveBook], seq: Int) {
        self.record = record
        self.members = members
        baseSeq = seq
        self.ordered = ordered
    }

    package var id: String { record.id }

    /// One field's value; inside `withObservationTracking`, tracks that field alone.
    subscript(field: LibraryField) -> FieldValue {
        access(keyPath: Self.paths[field.rawValue])
        return record[field]
    }

    /// The key path each field is observed by, made once.
    private static let paths = LibraryField.allCases.map { \LiveLibrary.[$0] }

    /// Takes the values of `new`, telling Observation of the fields the write set (`fields`, from
    /// the writer's `ChangeItem`) whose values differ: within changes folded on the way to the live
    /// side a field may have been set and set back. No other field is compared.
    func update(_ new: LibraryRecord, fields: Set<LibraryField>) {
        let changed = LibraryField.allCases.filter { $0 != .id && fields.contains($0) && new[$0] != record[$0] }
        if !changed.isEmpty { mutating(changed[...]) { record = new } }
    }

    /// Runs `change` as a mutation of each of `fields`: Observation hears of each one, and of no other.
    private func mutating(_ fields: ArraySlice<LibraryField>, _ change: () -> Void) {
        guard let field = fields.first else { return change() }
        withMutation(keyPath: Self.paths[field.rawValue]) { mutating(fields.dropFirst(), change) }
    }

    func add(_ book: LiveBook) {
        members[book.id] = book
        ordered = nil
    }

    func remove(_ bookID: String) {
        members[bookID] = nil
        ordered = nil
    }

    /// The members in insertion order (as `GET /libraries/{id}/books` lists them).
    func orderedMembers() -> [LiveBook] {
        if let ordered { return ordered }
        let sorted = members.values.sorted { $0.order < $1.order }
        ordered = sorted
        return sorted
    }

    /// Tracks each of `fields` not tracked yet, and the membership when `members` is set.
    func track(
        _ fields: Set<LibraryField>,
        members trackMembers: Bool,
        changed: @escaping @LiveActor (LiveLibrary, LibraryField?) -> Void
    ) {
        for field in fields where field != .id && !armed.contains(field) {
            armed.insert(field)
            // Unowned, not weak: the tracker lives in this model's own registrar, so it can only
            // fire while the model is alive, and a weak reference would give every model a side
            // table, making each retain of it (a million for a big snapshot) take the slow path.
            trackOnce({ _ = self[field] }) { [unowned self] in
                armed.remove(field)
                changed(self, field)
            }
        }
        if trackMembers && !membersArmed {
            membersArmed = true
            trackOnce({ _ = members }) { [unowned self] in
                membersArmed = false
                changed(self, nil)
            }
        }
    }
}
