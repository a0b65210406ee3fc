import Glibc

/// A book as stored: the plain, Sendable value used for JSON and SQL. Its fields are the rows of
/// `BookField`; everything that does not need one field by name reads them through the table.
package struct BookRecord: FieldRecord {
    package var id: String
    package var libraryId: String
    package var title: String
    package var author: String
    package var isbn: String?
    package var publishedYear: Int?
    package var available: Bool
    package var version: Int
    package var createdAt: String
    package var updatedAt: String
    /// Insertion order, the key lists page by. Not part of the public representation.
    package var seq: Int

    package init(seq: Int, _ value: (BookField) -> FieldValue) {
        id = value(.id).requiredString
        libraryId = value(.libraryId).requiredString
        title = value(.title).requiredString
        author = value(.author).requiredString
        isbn = value(.isbn).string
        publishedYear = value(.publishedYear).int
        available = value(.available).requiredBool
        version = value(.version).requiredInt
        createdAt = value(.createdAt).requiredString
        updatedAt = value(.updatedAt).requiredString
        self.seq = seq
    }

    package subscript(field: BookField) -> FieldValue {
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

    package var draft: BookDraft { BookDraft { self[$0] } }
}

/// The writable fields of a book, as a client sends them (with the table's defaults).
package struct BookDraft: FieldDraft {
    package var libraryId: String
    package var title: String
    package var author: String
    package var isbn: String?
    package var publishedYear: Int?
    package var available: Bool

    package init(
        libraryId: String,
        title: String,
        author: String = "",
        isbn: String? = nil,
        publishedYear: Int? = nil,
        available: Bool = true
    ) {
        self.libraryId = libraryId
        self.title = title
        self.author = author
        self.isbn = isbn
        self.publishedYear = publishedYear
        self.available = available
    }

    package init(_ value: (BookField) -> FieldValue) {
        self.init(libraryId: "", title: "")
        for field in BookField.writable { self[field] = value(field) }
    }

    package subscript(field: BookField) -> FieldValue {
        get {
            switch field {
            case .libraryId: .string(libraryId)
            case .title: .string(title)
            case .author: .string(author)
            case .isbn: FieldValue(isbn)
            case .publishedYear: FieldValue(publishedYear)
            case .available: .bool(available)
            case .id, .version, .createdAt, .updatedAt: preconditionFailure("\(field) is not writable")
            }
        }
        set {
            switch field {
            case .libraryId: libraryId = newValue.requiredString
            case .title: title = newValue.requiredString
            case .author: author = newValue.requiredString
            case .isbn: isbn = newValue.string
            case .publishedYear: publishedYear = newValue.int
            case .available: available = newValue.requiredBool
            case .id, .version, .createdAt, .updatedAt: preconditionFailure("\(field) is not writable")
            }
        }
    }
}

extension BookField {
    /// Each field's position in `filterable` (nil: not filtered by), by raw value.
    @usableFromInline static let filterPositions: [Int?] = allCases.map { filterable.firstIndex(of: $0) }

    /// The field's position in `filterable`; a field no collection is filtered by here is a
    /// programming error.
    @inlinable var filterPosition: Int {
        guard let position = Self.filterPositions[rawValue] else { preconditionFailure("\(name) is not filterable") }
        return position
    }
}

extension FieldValue {
    /// Equal byte for byte: text as SQLite and PostgreSQL (`COLLATE "C"`) compare it, where Swift's
    /// `==` would equate canonically equivalent strings (a composed and a decomposed "é").
    @inlinable package func sameBytes(_ other: FieldValue) -> Bool {
        switch (self, other) {
        case (.string(var a), .string(var b)):
            // `memcmp` over the contiguous UTF-8 (`elementsEqual` on two `UTF8View`s steps through
            // a generic iterator, about 80 instructions a byte: most of a PATCH's change-log row).
            a.utf8.count == b.utf8.count
                && a.withUTF8 { x in
                    b.withUTF8 { y in x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
                }
        default: self == other
        }
    }

    /// Hashes as `sameBytes` compares.
    @inlinable package func hashBytes(into hasher: inout Hasher) {
        switch self {
        case .string(let text):
            hasher.combine(0 as UInt8)
            text.utf8.forEach { hasher.combine($0) }
            hasher.combine(0xFF as UInt8)  // never a UTF-8 byte: ends the text
        default: hasher.combine(self)
        }
    }
}

/// Which books a list or a collection stream returns: for each filterable field
/// (`BookField.filterable`, from the field table) the value it must equal, or none.
package struct BookFilter: Sendable, Hashable {
    /// By position in `BookField.filterable`; nil: any value.
    @usableFromInline var values: [FieldValue?]

    /// No condition: every book.
    package init() { values = Array(repeating: nil, count: BookField.filterable.count) }

    /// Each field equal to its value (each field must be filterable).
    package init(_ conditions: [BookField: FieldValue]) {
        self.init()
        for (field, value) in conditions { self[field] = value }
    }

    /// The value `field` must equal, or nil.
    @inlinable package subscript(field: BookField) -> FieldValue? {
        get { values[field.filterPosition] }
        set { values[field.filterPosition] = newValue }
    }

    /// The library the filter names, if it names one: the one condition the change log is
    /// searched by (a collection's replay reads the log by library, then tests the rest).
    package var library: String? {
        get { self[.libraryId]?.string }
        set { self[.libraryId] = newValue.map(FieldValue.string) }
    }

    /// The same filter with only its library: what a replay of the change log reads by.
    package var libraryOnly: BookFilter {
        var filter = BookFilter()
        filter[.libraryId] = self[.libraryId]
        return filter
    }

    /// The filtered fields and the value each must equal, in table order.
    package var conditions: [(BookField, FieldValue)] {
        zip(BookField.filterable, values).compactMap { field, value in value.map { (field, $0) } }
    }

    /// Whether a book with these filtered values is in the list. Text is compared byte for byte,
    /// as the databases compare it for `GET /books`.
    package func matches(_ keys: BookKeys) -> Bool {
        for (value, key) in zip(values, keys.values) {
            if let value, !value.sameBytes(key) { return false }
        }
        return true
    }

    /// Byte for byte, as `matches`: streams whose filters differ only in normalization are apart.
    package static func == (lhs: BookFilter, rhs: BookFilter) -> Bool {
        zip(lhs.values, rhs.values).allSatisfy { a, b in
            switch (a, b) {
            case (nil, nil): true
            case (let a?, let b?): a.sameBytes(b)
            default: false
            }
        }
    }

    package func hash(into hasher: inout Hasher) {
        for value in values {
            hasher.combine(value != nil)
            value?.hashBytes(into: &hasher)
        }
    }

    /// Every filter a book with `keys` matches (each filtered field either unset or equal to the
    /// book's value): the 2^n keys (n filterable fields) under which the collection streams that
    /// can see it are found.
    package static func all(matching keys: BookKeys) -> [BookFilter] {
        let count = keys.values.count
        var filters: [BookFilter] = []
        filters.reserveCapacity(1 << count)
        for mask in 0..<(1 << count) {
            var filter = BookFilter()
            for position in 0..<count where mask & (1 << position) != 0 {
                filter.values[position] = keys.values[position]
            }
            filters.append(filter)
        }
        return filters
    }
}

/// The values of a book that list filters test (`BookField.filterable`), as they were before a
/// change: whether the change made the book enter or leave a filtered collection is decided from
/// these and the new values.
package struct BookKeys: Sendable, Hashable {
    /// By position in `BookField.filterable`.
    package var values: [FieldValue]

    /// The book's values of the filterable fields.
    package init(_ book: BookRecord) { values = BookField.filterable.map { book[$0] } }

    /// The value of a filterable field.
    package subscript(field: BookField) -> FieldValue {
        get { values[field.filterPosition] }
        set { values[field.filterPosition] = newValue }
    }

    /// The library the book was in.
    package var library: String { self[BookField.library].requiredString }
}

extension BookRecord {
    /// The values list filters test.
    package var keys: BookKeys { BookKeys(self) }

    /// The library the book belongs to (`BookField.library`).
    package var library: String { libraryId }
}

extension BookDraft {
    /// The library the book is to belong to (`BookField.library`).
    package var library: String { libraryId }
}

/// One page of a list, in insertion order.
package struct Page<Item: Sendable>: Sendable {
    package init(items: [Item], next: Int?) {
        self.items = items
        self.next = next
    }

    package var items: [Item]
    /// The `seq` to continue after, or nil when this is the last page.
    package var next: Int?
}
