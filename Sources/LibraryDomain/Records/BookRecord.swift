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

/// Which books a list or a collection stream returns; nil means no filter on that field.
package struct BookFilter: Sendable, Hashable {
    package var libraryId: String?
    package var author: String?
    package var available: Bool?

    package init(libraryId: String? = nil, author: String? = nil, available: Bool? = nil) {
        self.libraryId = libraryId
        self.author = author
        self.available = available
    }

    /// The filtered fields and the value each must equal, in table order.
    package var conditions: [(BookField, FieldValue)] {
        var conditions: [(BookField, FieldValue)] = []
        if let libraryId { conditions.append((.libraryId, .string(libraryId))) }
        if let author { conditions.append((.author, .string(author))) }
        if let available { conditions.append((.available, .bool(available))) }
        return conditions
    }

    /// Whether a book with these filtered values is in the list. Text is compared byte for byte,
    /// as SQLite compares it for `GET /books` (Swift's `==` would equate canonically equivalent
    /// strings, such as a composed and a decomposed "é").
    package func matches(_ keys: BookKeys) -> Bool {
        (libraryId == nil || libraryId!.utf8.elementsEqual(keys.libraryId.utf8))
            && (author == nil || author!.utf8.elementsEqual(keys.author.utf8))
            && (available == nil || available == keys.available)
    }

    /// Byte for byte, as `matches`: streams whose filters differ only in normalization are apart.
    package static func == (lhs: BookFilter, rhs: BookFilter) -> Bool {
        func same(_ a: String?, _ b: String?) -> Bool {
            switch (a, b) {
            case (nil, nil): true
            case (let a?, let b?): a.utf8.elementsEqual(b.utf8)
            default: false
            }
        }
        return same(lhs.libraryId, rhs.libraryId) && same(lhs.author, rhs.author) && lhs.available == rhs.available
    }

    package func hash(into hasher: inout Hasher) {
        for text in [libraryId, author] {
            hasher.combine(text != nil)
            text?.utf8.forEach { hasher.combine($0) }
            hasher.combine(0xFF as UInt8)  // never a UTF-8 byte: ends the text
        }
        hasher.combine(available)
    }

    /// Every filter a book with `keys` matches (each filtered field either unset or equal to the
    /// book's value): the 8 keys under which collection streams that can see it are found.
    package static func all(matching keys: BookKeys) -> [BookFilter] {
        var filters: [BookFilter] = []
        filters.reserveCapacity(8)
        for library in [nil, keys.libraryId] {
            for author in [nil, keys.author] {
                for available in [nil, keys.available] {
                    filters.append(BookFilter(libraryId: library, author: author, available: available))
                }
            }
        }
        return filters
    }
}

/// The values of a book that list filters test, as they were before a change: whether the change
/// made the book enter or leave a filtered collection is decided from these and the new values.
package struct BookKeys: Sendable, Hashable {
    package var libraryId: String
    package var author: String
    package var available: Bool

    package init(libraryId: String, author: String, available: Bool) {
        self.libraryId = libraryId
        self.author = author
        self.available = available
    }
}

extension BookRecord {
    /// The values list filters test.
    package var keys: BookKeys { BookKeys(libraryId: libraryId, author: author, available: available) }
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
