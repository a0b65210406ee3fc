import Observation

/// A book that somebody watches, as an observable model.
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

    /// Subscribers of this book's own stream, by subscriber id.
    @ObservationIgnored var subscribers: [Int: Subscriber] = [:]
    /// Fields with an Observation tracker waiting for their next change.
    @ObservationIgnored var armed: Set<BookField> = []
    /// Fields changed by the change being applied, not yet published.
    @ObservationIgnored var dirty: Set<BookField> = []

    init(_ record: BookRecord) {
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
        for field in fields.subtracting(armed) where field != .id {
            armed.insert(field)
            trackOnce({ _ = value(of: field) }) { [weak self] in
                guard let self else { return }
                armed.remove(field)
                changed(self, field)
            }
        }
    }
}
