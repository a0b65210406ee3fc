import Observation

/// A library that somebody watches, as an observable model, with its books as live members.
@LiveActor
@Observable
package final class LiveLibrary {
    package let id: String
    var name: String
    var address: String?
    /// The member books, in insertion order.
    var books: [LiveBook]
    var version: Int
    var createdAt: String
    var updatedAt: String

    /// Computed from `books`, so tracking it tracks the membership.
    var bookCount: Int { books.count }

    @ObservationIgnored var subscribers: [Int: Subscriber] = [:]
    @ObservationIgnored var armed: Set<LibraryField> = []
    @ObservationIgnored var membersArmed = false
    @ObservationIgnored var dirty: Set<LibraryField> = []
    @ObservationIgnored var membersDirty = false
    /// The member ids as last published, to tell subscribers what joined and what left.
    @ObservationIgnored var publishedMembers: Set<String> = []

    init(_ record: LibraryRecord, books: [LiveBook]) {
        id = record.id
        name = record.name
        address = record.address
        self.books = books
        version = record.version
        createdAt = record.createdAt
        updatedAt = record.updatedAt
        publishedMembers = Set(books.map(\.id))
    }

    /// Takes the values of `record` (all but `bookCount`, which follows `books`).
    func update(_ record: LibraryRecord) {
        if name != record.name { name = record.name }
        if address != record.address { address = record.address }
        if version != record.version { version = record.version }
        if createdAt != record.createdAt { createdAt = record.createdAt }
        if updatedAt != record.updatedAt { updatedAt = record.updatedAt }
    }

    func add(_ book: LiveBook) {
        guard !books.contains(where: { $0 === book }) else { return }
        books.append(book)
    }

    func remove(_ bookID: String) {
        guard books.contains(where: { $0.id == bookID }) else { return }
        books.removeAll { $0.id == bookID }
    }

    /// Reads one field, tracking that field alone (not through a `LibraryRecord`, which reads all).
    func value(of field: LibraryField) -> FieldValue {
        switch field {
        case .id: .string(id)
        case .name: .string(name)
        case .address: FieldValue(address)
        case .bookCount: .int(bookCount)
        case .version: .int(version)
        case .createdAt: .string(createdAt)
        case .updatedAt: .string(updatedAt)
        }
    }

    /// Tracks each of `fields` not tracked yet, and the membership when `members` is set.
    func track(
        _ fields: Set<LibraryField>,
        members: Bool,
        changed: @escaping @LiveActor (LiveLibrary, LibraryField?) -> Void
    ) {
        for field in fields.subtracting(armed) where field != .id {
            armed.insert(field)
            trackOnce({ _ = value(of: field) }) { [weak self] in
                guard let self else { return }
                armed.remove(field)
                changed(self, field)
            }
        }
        if members && !membersArmed {
            membersArmed = true
            trackOnce({ _ = books }) { [weak self] in
                guard let self else { return }
                membersArmed = false
                changed(self, nil)
            }
        }
    }
}
