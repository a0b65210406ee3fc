import LibraryDomain
import Observation

/// A book that somebody watches, directly or as a member of a watched library, as an observable
/// model.
///
/// Applying a committed change assigns only the fields whose values differ, so Observation reports
/// exactly the fields a write changed. Bookkeeping is `@ObservationIgnored`: touching it never
/// notifies anybody.
@LiveActor
@Observable
package final class LiveBook {
    package let id: String
    var libraryId: String
    var title: String
    var author: String
    var isbn: String?
    var publishedYear: Int?
    var available: Bool
    var version: Int
    var createdAt: String
    var updatedAt: String

    /// Insertion order (the row's `seq`), the order of a library's members.
    @ObservationIgnored let order: Int
    /// The latest change this model already reflects: older ones, still on their way, are skipped.
    @ObservationIgnored var baseSeq: Int
    /// Fields with an Observation tracker waiting for their next change.
    @ObservationIgnored var armed: Set<BookField> = []
    /// Fields changed by the change being applied, not yet published.
    @ObservationIgnored var dirty: Set<BookField> = []
    /// The change that made it a member of its library: it is `added` there, not `changed`.
    @ObservationIgnored var joinedSeq = 0

    init(_ record: BookRecord, seq: Int) {
        id = record.id
        libraryId = record.libraryId
        title = record.title
        author = record.author
        isbn = record.isbn
        publishedYear = record.publishedYear
        available = record.available
        version = record.version
        createdAt = record.createdAt
        updatedAt = record.updatedAt
        order = record.seq
        baseSeq = seq
    }

    /// Takes the values of `record`, assigning only what differs.
    func update(_ record: BookRecord) {
        if libraryId != record.libraryId { libraryId = record.libraryId }
        if title != record.title { title = record.title }
        if author != record.author { author = record.author }
        if isbn != record.isbn { isbn = record.isbn }
        if publishedYear != record.publishedYear { publishedYear = record.publishedYear }
        if available != record.available { available = record.available }
        if version != record.version { version = record.version }
        if createdAt != record.createdAt { createdAt = record.createdAt }
        if updatedAt != record.updatedAt { updatedAt = record.updatedAt }
    }

    /// Reads one field (and so, inside `withObservationTracking`, tracks that field alone: going
    /// through a `BookRecord` would read, and track, every field).
    func value(of field: BookField) -> FieldValue {
        switch field {
        case .id: .string(id)
        case .libraryId: .string(libraryId)
        case .title: .string(title)
        case .author: .string(author)
        case .isbn: FieldValue(isbn)
        case .publishedYear: FieldValue(publishedYear)
        case .available: .bool(available)
        case .version: .int(version)
        case .createdAt: .string(createdAt)
        case .updatedAt: .string(updatedAt)
        }
    }

    /// Tracks each of `fields` not tracked yet; `changed` hears of the first change of each.
    func track(_ fields: Set<BookField>, changed: @escaping @LiveActor (LiveBook, BookField) -> Void) {
        for field in fields where field != .id && !armed.contains(field) {
            armed.insert(field)
            // Unowned, not weak: the tracker lives in this model's own registrar, so it can only
            // fire while the model is alive, and a weak reference would give every model a side
            // table, making each retain of it (a million for a big snapshot) take the slow path.
            trackOnce({ _ = value(of: field) }) { [unowned self] in
                armed.remove(field)
                changed(self, field)
            }
        }
    }
}
