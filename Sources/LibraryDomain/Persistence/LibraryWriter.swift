import SQLite

/// The writes of libraries and books, run inside one transaction by `LibraryStore.write`.
///
/// Each method checks existence (404), then `If-Match` (412), then the values (422), and writes
/// nothing when the new values equal the stored ones, so `version` counts real changes only.
package struct LibraryWriter {
    let connection: Connection

    /// Reads within the same transaction.
    package var reader: LibraryReader { LibraryReader(connection: connection) }

    package func createLibrary(_ draft: LibraryDraft) throws -> LibraryRecord {
        try Self.check(draft.validate())
        let now = Timestamp.now()
        return try connection.statement(
            """
            INSERT INTO libraries (id, name, address, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
            RETURNING \(LibraryReader.libraryColumns)
            """
        ).first(
            [.text(Identifier.make()), .text(draft.name), .optional(draft.address), .text(now), .text(now)],
            LibraryReader.library)!
    }

    /// Replaces the writable fields with `change(current)`.
    package func updateLibrary(
        id: String,
        if precondition: Precondition,
        _ change: (LibraryDraft) -> LibraryDraft
    ) throws -> LibraryRecord {
        let current = try existing(reader.library(id: id), precondition, version: \.version)
        let draft = change(current.draft)
        try Self.check(draft.validate())
        guard draft != current.draft else { return current }
        return try connection.statement(
            """
            UPDATE libraries SET name = ?, address = ?, version = version + 1, updated_at = ? WHERE id = ?
            RETURNING \(LibraryReader.libraryColumns)
            """
        ).first(
            [.text(draft.name), .optional(draft.address), .text(Timestamp.now()), .text(id)], LibraryReader.library)!
    }

    /// Deletes a library and its books; returns the library as it was and its books' ids.
    package func deleteLibrary(id: String, if precondition: Precondition) throws -> (LibraryRecord, bookIDs: [String]) {
        let current = try existing(reader.library(id: id), precondition, version: \.version)
        let bookIDs = try connection.statement("SELECT id FROM books WHERE library_id = ? ORDER BY seq")
            .map([.text(id)]) { $0.text(0) }
        try connection.statement("DELETE FROM libraries WHERE id = ?").run([.text(id)])
        return (current, bookIDs)
    }

    package func createBook(_ draft: BookDraft) throws -> BookRecord {
        try Self.check(draft.validate())
        try requireLibrary(draft.libraryId)
        let now = Timestamp.now()
        let book = try connection.statement(
            """
            INSERT INTO books (id, library_id, title, author, isbn, published_year, available, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            RETURNING \(LibraryReader.bookColumns)
            """
        ).first(
            [
                .text(Identifier.make()), .text(draft.libraryId), .text(draft.title), .text(draft.author),
                .optional(draft.isbn), .optional(draft.publishedYear), .bool(draft.available), .text(now), .text(now),
            ],
            LibraryReader.book
        )!
        try adjustBookCount(of: draft.libraryId, by: 1, at: now)
        return book
    }

    /// Replaces the writable fields with `change(current)`; a new `libraryId` moves the book.
    package func updateBook(id: String, if precondition: Precondition, _ change: (BookDraft) -> BookDraft) throws
        -> BookRecord
    {
        let current = try existing(reader.book(id: id), precondition, version: \.version)
        let draft = change(current.draft)
        try Self.check(draft.validate())
        guard draft != current.draft else { return current }
        let now = Timestamp.now()
        if draft.libraryId != current.libraryId {
            try requireLibrary(draft.libraryId)
            try adjustBookCount(of: current.libraryId, by: -1, at: now)
            try adjustBookCount(of: draft.libraryId, by: 1, at: now)
        }
        return try connection.statement(
            """
            UPDATE books SET library_id = ?, title = ?, author = ?, isbn = ?, published_year = ?, available = ?,
                version = version + 1, updated_at = ?
            WHERE id = ?
            RETURNING \(LibraryReader.bookColumns)
            """
        ).first(
            [
                .text(draft.libraryId), .text(draft.title), .text(draft.author), .optional(draft.isbn),
                .optional(draft.publishedYear), .bool(draft.available), .text(now), .text(id),
            ],
            LibraryReader.book
        )!
    }

    /// Deletes a book; returns it as it was.
    package func deleteBook(id: String, if precondition: Precondition) throws -> BookRecord {
        let current = try existing(reader.book(id: id), precondition, version: \.version)
        try connection.statement("DELETE FROM books WHERE id = ?").run([.text(id)])
        try adjustBookCount(of: current.libraryId, by: -1, at: Timestamp.now())
        return current
    }

    private func existing<T>(_ record: T?, _ precondition: Precondition, version: KeyPath<T, Int>) throws -> T {
        guard let record else { throw StoreError(.notFound) }
        guard precondition.allows(record[keyPath: version]) else { throw StoreError(.preconditionFailed) }
        return record
    }

    private func requireLibrary(_ id: String) throws {
        guard try reader.library(id: id) != nil else {
            throw StoreError(.invalid([FieldError("libraryId", "no library has this id")]))
        }
    }

    /// A book joining or leaving changes the library's `bookCount`, which is a change of the library.
    private func adjustBookCount(of libraryID: String, by delta: Int, at now: String) throws {
        try connection.statement(
            "UPDATE libraries SET book_count = book_count + ?, version = version + 1, updated_at = ? WHERE id = ?"
        ).run([.int(delta), .text(now), .text(libraryID)])
    }

    private static func check(_ errors: [FieldError]) throws {
        if !errors.isEmpty { throw StoreError(.invalid(errors)) }
    }
}
