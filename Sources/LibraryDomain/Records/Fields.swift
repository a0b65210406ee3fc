/// The fields of a library's representation, in the order they are written.
package enum LibraryField: String, CaseIterable, Sendable, Hashable {
    case id, name, address, bookCount, version, createdAt, updatedAt
}

/// The fields of a book's representation, in the order they are written.
package enum BookField: String, CaseIterable, Sendable, Hashable {
    case id, libraryId, title, author, isbn, publishedYear, available, version, createdAt, updatedAt
}

/// A field's value, as events carry it.
package enum FieldValue: Sendable, Equatable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null

    package init(_ value: String?) { self = value.map(FieldValue.string) ?? .null }
    package init(_ value: Int?) { self = value.map(FieldValue.int) ?? .null }
}

extension LibraryRecord {
    /// The value of one field.
    package func value(of field: LibraryField) -> FieldValue {
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
}

extension BookRecord {
    /// The value of one field.
    package func value(of field: BookField) -> FieldValue {
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
}
