/// A book as stored: the plain, Sendable value used for JSON and SQL.
package struct BookRecord: Sendable, Equatable {
    package init(
        id: String, libraryId: String, title: String, author: String, isbn: String?, publishedYear: Int?,
        available: Bool, version: Int, createdAt: String, updatedAt: String, seq: Int
    ) {
        self.id = id
        self.libraryId = libraryId
        self.title = title
        self.author = author
        self.isbn = isbn
        self.publishedYear = publishedYear
        self.available = available
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.seq = seq
    }

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

    /// The writable fields.
    package var draft: BookDraft {
        BookDraft(
            libraryId: libraryId,
            title: title,
            author: author,
            isbn: isbn,
            publishedYear: publishedYear,
            available: available
        )
    }
}

/// The writable fields of a book, as a client sends them (with the documented defaults).
package struct BookDraft: Sendable, Equatable {
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

    /// Field errors that make this draft unacceptable; empty when it is valid. Whether the library
    /// exists is checked by the store, inside the write.
    package func validate() -> [FieldError] {
        var errors: [FieldError] = []
        if !Identifier.isValid(libraryId) {
            errors.append(FieldError("libraryId", "must be a UUID"))
        }
        if title.unicodeScalars.isEmpty || title.unicodeScalars.count > 500 {
            errors.append(FieldError("title", "must be 1 to 500 characters long"))
        }
        if author.unicodeScalars.count > 300 {
            errors.append(FieldError("author", "must be at most 300 characters long"))
        }
        for (field, text) in [("title", title), ("author", author)] where text.utf8.contains(0) {
            errors.append(FieldError(field, FieldError.noNUL))
        }
        if let isbn, !ISBN.isValid(isbn) {
            errors.append(FieldError("isbn", "must be a valid ISBN-10 or ISBN-13 (hyphens allowed, checksum checked)"))
        }
        if let publishedYear, !(-9999...9999).contains(publishedYear) {
            errors.append(FieldError("publishedYear", "must be between -9999 and 9999"))
        }
        return errors
    }
}

/// A JSON merge patch (RFC 7396) of a book: nil leaves a field alone, `.some(nil)` clears it.
package struct BookPatch: Sendable, Equatable {
    package var libraryId: String?
    package var title: String?
    package var author: String?
    package var isbn: String??
    package var publishedYear: Int??
    package var available: Bool?

    package init() {}

    /// The field errors of the values this patch sets (the others are stored, hence valid).
    package func validate() -> [FieldError] {
        let placeholder = BookDraft(libraryId: "00000000-0000-4000-8000-000000000000", title: "-")
        return applied(to: placeholder).validate()
    }

    /// `draft` with this patch applied.
    package func applied(to draft: BookDraft) -> BookDraft {
        var result = draft
        if let libraryId { result.libraryId = libraryId }
        if let title { result.title = title }
        if let author { result.author = author }
        if let isbn { result.isbn = isbn }
        if let publishedYear { result.publishedYear = publishedYear }
        if let available { result.available = available }
        return result
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
