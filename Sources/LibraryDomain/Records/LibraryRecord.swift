/// A library as stored: the plain, Sendable value used for JSON and SQL. Its fields are the rows
/// of `LibraryField`.
package struct LibraryRecord: FieldRecord {
    package var id: String
    package var name: String
    package var address: String?
    /// Books in this library; maintained by the store on every book write.
    package var bookCount: Int
    /// Starts at 1 and grows by one per change, including a change of `bookCount`.
    package var version: Int
    package var createdAt: String
    package var updatedAt: String
    /// Insertion order, the key lists page by. Not part of the public representation.
    package var seq: Int

    package init(seq: Int, _ value: (LibraryField) -> FieldValue) {
        id = value(.id).requiredString
        name = value(.name).requiredString
        address = value(.address).string
        bookCount = value(.bookCount).requiredInt
        version = value(.version).requiredInt
        createdAt = value(.createdAt).requiredString
        updatedAt = value(.updatedAt).requiredString
        self.seq = seq
    }

    package subscript(field: LibraryField) -> FieldValue {
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

    package var draft: LibraryDraft { LibraryDraft(name: name, address: address) }
}

/// The writable fields of a library, as a client sends them.
package struct LibraryDraft: FieldDraft {
    package var name: String
    package var address: String?

    package init(name: String, address: String? = nil) {
        self.name = name
        self.address = address
    }

    package init(_ value: (LibraryField) -> FieldValue) {
        self.init(name: value(.name).requiredString, address: value(.address).string)
    }

    package subscript(field: LibraryField) -> FieldValue {
        get {
            switch field {
            case .name: .string(name)
            case .address: FieldValue(address)
            case .id, .bookCount, .version, .createdAt, .updatedAt: preconditionFailure("\(field) is not writable")
            }
        }
        set {
            switch field {
            case .name: name = newValue.requiredString
            case .address: address = newValue.string
            case .id, .bookCount, .version, .createdAt, .updatedAt: preconditionFailure("\(field) is not writable")
            }
        }
    }
}
