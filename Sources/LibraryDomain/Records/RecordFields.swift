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
