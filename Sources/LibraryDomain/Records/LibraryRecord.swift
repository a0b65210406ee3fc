/// A library as stored: the plain, Sendable value used for JSON and SQL.
package struct LibraryRecord: Sendable, Equatable {
    package init(
        id: String, name: String, address: String?, bookCount: Int, version: Int, createdAt: String, updatedAt: String,
        seq: Int
    ) {
        self.id = id
        self.name = name
        self.address = address
        self.bookCount = bookCount
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.seq = seq
    }

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

    /// The writable fields.
    package var draft: LibraryDraft { LibraryDraft(name: name, address: address) }
}

/// The writable fields of a library, as a client sends them.
package struct LibraryDraft: Sendable, Equatable {
    package var name: String
    package var address: String?

    package init(name: String, address: String? = nil) {
        self.name = name
        self.address = address
    }

    /// Field errors that make this draft unacceptable; empty when it is valid. Lengths count Unicode
    /// scalars (code points), as JSON Schema's `maxLength` does.
    package func validate() -> [FieldError] {
        var errors: [FieldError] = []
        let length = name.unicodeScalars.count
        if length < 1 || length > 200 {
            errors.append(FieldError("name", "must be 1 to 200 characters long"))
        }
        if let address, address.unicodeScalars.count > 500 {
            errors.append(FieldError("address", "must be at most 500 characters long"))
        }
        for (field, text) in [("name", name), ("address", address ?? "")] where text.utf8.contains(0) {
            errors.append(FieldError(field, FieldError.noNUL))
        }
        return errors
    }
}

/// A JSON merge patch (RFC 7396) of a library: nil leaves a field alone, `.some(nil)` clears it.
package struct LibraryPatch: Sendable, Equatable {
    package var name: String?
    package var address: String??

    package init(name: String? = nil, address: String?? = nil) {
        self.name = name
        self.address = address
    }

    /// `draft` with this patch applied.
    package func applied(to draft: LibraryDraft) -> LibraryDraft {
        var result = draft
        if let name { result.name = name }
        if let address { result.address = address }
        return result
    }
}
