import LibraryDomain
import SQLite

/// The writes of libraries and books, run inside one transaction by `LibraryStore.write`.
///
/// Each method checks existence (404), then the values (422), then `If-Match` (412), and writes
/// nothing when the new values equal the stored ones, so `version` counts real changes only.
/// Every resource it changes is noted as a `ChangeItem`, for the change log and the live models.
package final class LibraryWriter {
    let session: SQLSession
    private(set) var items: [ChangeItem] = []
    private var itemIndex: [String: Int] = [:]
    /// The outcome of this write's fast-path statement, already run by `PGWriter` in a pipeline
    /// with others: `.some(nil)` when it changed no row. Taken by `patchBook` instead of running
    /// the statement; nil once taken.
    var prefetched: SQLRow??

    init(session: SQLSession, prefetched: SQLRow?? = nil) {
        self.session = session
        self.prefetched = prefetched
    }

    /// Reads within the same transaction.
    package var reader: LibraryReader { LibraryReader(session: session) }

    /// The SQLite connection, for tests that inspect SQLite itself; nil on PostgreSQL.
    package var connection: Connection? { session.sqliteConnection }

    package func createLibrary(_ draft: LibraryDraft) throws -> LibraryRecord {
        try Self.check(draft.validate())
        let now = Timestamp.now()
        let library = try insert(draft, into: Tables.libraries, now: now)
        note(.library(library, fields: library.changedFields(from: nil), deleted: false))
        return library
    }

    /// Replaces the writable fields with `change(current)`.
    package func updateLibrary(
        id: String,
        if precondition: Precondition,
        _ change: (LibraryDraft) -> LibraryDraft
    ) throws -> LibraryRecord {
        let current = try existing(reader.library(id: id))
        let draft = change(current.draft)
        try Self.check(draft.validate())
        try check(precondition, version: current.version)
        guard draft != current.draft else { return current }
        let library = try update(id, from: current.draft, to: draft, in: Tables.libraries, now: Timestamp.now())
        note(.library(library, fields: library.changedFields(from: current), deleted: false))
        return library
    }

    /// Deletes a library and its books; returns the library as it was and its books' ids.
    package func deleteLibrary(id: String, if precondition: Precondition) throws -> (LibraryRecord, bookIDs: [String]) {
        let current = try existing(reader.library(id: id))
        try check(precondition, version: current.version)
        let books = try session.map(
            "SELECT \(Tables.books.columns) FROM books WHERE library_id = ? ORDER BY seq", [.text(id)],
            LibraryReader.book)
        try session.run("DELETE FROM libraries WHERE id = ?", [.text(id)])
        for book in books {
            note(.book(book, fields: [], before: book.keys, deleted: true))
        }
        note(.library(current, fields: [], deleted: true))
        return (current, books.map(\.id))
    }

    package func createBook(_ draft: BookDraft) throws -> BookRecord {
        try Self.check(draft.validate())
        try requireLibrary(draft.libraryId)
        let now = Timestamp.now()
        let book = try insert(draft, into: Tables.books, now: now)
        try adjustBookCount(of: draft.libraryId, by: 1, at: now)
        note(.book(book, fields: book.changedFields(from: nil), before: nil, deleted: false))
        return book
    }

    /// Replaces the writable fields with `change(current)`; a new `libraryId` moves the book.
    package func updateBook(id: String, if precondition: Precondition, _ change: (BookDraft) -> BookDraft) throws
        -> BookRecord
    {
        let current = try existing(reader.book(id: id))
        let draft = change(current.draft)
        try Self.check(draft.validate())
        if draft.libraryId != current.libraryId { try requireLibrary(draft.libraryId) }
        try check(precondition, version: current.version)
        guard draft != current.draft else { return current }
        let now = Timestamp.now()
        if draft.libraryId != current.libraryId {
            try adjustBookCount(of: current.libraryId, by: -1, at: now)
            try adjustBookCount(of: draft.libraryId, by: 1, at: now)
        }
        let book = try update(id, from: current.draft, to: draft, in: Tables.books, now: now)
        note(
            .book(book, fields: book.changedFields(from: current), before: current.keys, deleted: false)
        )
        return book
    }

    /// Applies a merge patch. A patch of one field (the common PATCH) is one
    /// `UPDATE … RETURNING` with no read before it: the statement sets the field only where the row
    /// exists, passes the precondition and holds another value, so a row back means exactly that
    /// field changed. Anything else (no row: missing, stale or unchanged; several fields; a move;
    /// invalid values) takes `updateBook`, which reads first and answers 404, 422, 412 in order.
    ///
    /// A field lists filter by also needs its value before the change (a collection the book
    /// leaves): a boolean's is the other value; on PostgreSQL any other comes back from the same
    /// statement, read from the row as the statement found it (`FROM (SELECT …) AS before`).
    /// SQLite's `RETURNING` sees only the new row, so there such a field is read first (in the
    /// process, no round trip).
    ///
    /// Being one statement that either is the whole write or changes nothing, it can be sent ahead
    /// of time: PostgreSQL's writer pipelines a batch's fast paths (`SQLSession.probe`, `prefetched`).
    package func patchBook(id: String, if precondition: Precondition, _ patch: BookPatch) throws -> BookRecord {
        // At most 8 `If-Match` tags: each count is a statement of its own, prepared and kept.
        var fewTags = true
        if case .versions(let versions) = precondition { fewTags = versions.count <= 8 }
        if let (field, value) = patch.singleField, field.descriptor.errors(in: value).isEmpty, fewTags,
            let previous = previousValueSQL(field)
        {
            let column = field.descriptor.column
            var sql =
                "UPDATE books SET \(column) = ?1, version = version + 1, updated_at = ?2\(previous.from) WHERE id = ?3"
            var values: [SQLiteValue] = [SQLiteValue(value), .text(Timestamp.now()), .text(id)]
            if case .versions(let versions) = precondition {
                // No version can match an empty list (`If-Match` naming only tags that are not
                // versions); PostgreSQL has no `IN ()`.
                sql +=
                    versions.isEmpty
                    ? " AND 1 = 0"
                    : " AND version IN (\(versions.indices.map { "?\($0 + 4)" }.joined(separator: ", ")))"
                values += versions.map { .int($0) }
            }
            sql += " AND \(column) IS DISTINCT FROM ?1 RETURNING \(Tables.books.columns)\(previous.returning)"
            if case .probe = session { throw FastPathProbe.fastPath(sql: sql, values: values) }
            /// The book, and the field's value before when the statement returns it.
            func decode(_ row: SQLRow) -> (BookRecord, FieldValue?) {
                let shape = FieldShape(kind: field.descriptor.kind, nullable: true)
                return (
                    LibraryReader.book(row), previous.returning.isEmpty ? nil : row.value(Self.previousColumn, shape)
                )
            }
            let row: (BookRecord, FieldValue?)?
            if let prefetched {
                row = prefetched.map(decode)
                self.prefetched = nil
            } else {
                row = try session.first(sql, values, decode)
            }
            if let (book, previousValue) = row {
                // The row came back, so the field changed; a filtered field's value before it
                // came back with the row, or is a boolean's other value.
                var before = book.keys
                if let previousValue {
                    before[field] = previousValue
                } else if field.descriptor.filterable, case .bool(let now) = value {
                    before[field] = .bool(!now)
                }
                note(.book(book, fields: [field, .version, .updatedAt], before: before, deleted: false))
                return book
            }
        }
        return try updateBook(id: id, if: precondition) { patch.applied(to: $0) }
    }

    /// Deletes a book; returns it as it was.
    package func deleteBook(id: String, if precondition: Precondition) throws -> BookRecord {
        let current = try existing(reader.book(id: id))
        try check(precondition, version: current.version)
        try session.run("DELETE FROM books WHERE id = ?", [.text(id)])
        try adjustBookCount(of: current.libraryId, by: -1, at: Timestamp.now())
        note(.book(current, fields: [], before: current.keys, deleted: true))
        return current
    }

    private func existing<T>(_ record: T?) throws -> T {
        guard let record else { throw StoreError(.notFound) }
        return record
    }

    /// Checked after the content is known to be acceptable (RFC 9110 §13.2.1), so a request that
    /// is wrong in two ways gets the same answer whatever the stored version: 404, then 422, then 412.
    private func check(_ precondition: Precondition, version: Int) throws {
        guard precondition.allows(version) else { throw StoreError(.preconditionFailed) }
    }

    private func requireLibrary(_ id: String) throws {
        guard try reader.library(id: id) != nil else {
            throw StoreError(.invalid([FieldError("libraryId", "no library has this id")]))
        }
    }

    /// A book joining or leaving changes the library's `bookCount`, which is a change of the library.
    private func adjustBookCount(of libraryID: String, by delta: Int, at now: String) throws {
        let library = try session.first(
            """
            UPDATE libraries SET book_count = book_count + ?, version = version + 1, updated_at = ? WHERE id = ?
            RETURNING \(Tables.libraries.columns)
            """, [.int(delta), .text(now), .text(libraryID)], LibraryReader.library)
        if let library {
            note(.library(library, fields: [.bookCount, .version, .updatedAt], deleted: false))
        }
    }

    /// Inserts a new resource made of `draft`.
    private func insert<Record>(_ draft: Record.Draft, into table: RecordTable<Record>, now: String) throws -> Record {
        try session.first(table.insert, table.insertValues(id: Identifier.make(), draft, now: now), table.record)!
    }

    /// Sets the writable fields `draft` changes (only those, so the indexes on the others are left
    /// alone), counts a version and stamps the time.
    private func update<Record>(
        _ id: String, from current: Record.Draft, to draft: Record.Draft, in table: RecordTable<Record>, now: String
    ) throws -> Record {
        let changed = Record.Field.writable.filter { draft[$0] != current[$0] }
        let set = changed.map { "\($0.descriptor.column) = ?" } + ["version = version + 1", "updated_at = ?"]
        return try session.first(
            "UPDATE \(table.name) SET \(set.joined(separator: ", ")) WHERE id = ? RETURNING \(table.columns)",
            changed.map { SQLiteValue(draft[$0]) } + [.text(now), .text(id)],
            table.record)!
    }

    private func note(_ item: ChangeItem) {
        if let index = itemIndex[item.key] {
            items[index] = items[index].merged(with: item)
        } else {
            itemIndex[item.key] = items.count
            items.append(item)
        }
    }

    private static func check(_ errors: [FieldError]) throws {
        if !errors.isEmpty { throw StoreError(.invalid(errors)) }
    }
}

extension LibraryWriter {
    /// Where a fast-path statement returns the field's value before the change: right after the
    /// book's columns (`seq` and every field's).
    fileprivate static let previousColumn = Int32(BookField.allCases.count + 1)

    /// What a fast-path statement of `field` adds to return the field's value before the change,
    /// when collection streams need it (`ChangeItem.book`'s `before`): nothing for a field no
    /// list filters by, or a boolean (the other value); on PostgreSQL (and its writer's probe) a
    /// subquery of the row as the statement found it. Nil when the field cannot take the
    /// one-statement path here: such a field on SQLite, or a move (it changes two libraries).
    fileprivate func previousValueSQL(_ field: BookField) -> (from: String, returning: String)? {
        let descriptor = field.descriptor
        guard descriptor.filterable, descriptor.kind != .boolean else { return ("", "") }
        guard field != .libraryId else { return nil }
        switch session {
        case .sqlite: return nil
        case .postgres, .probe:
            return (
                " FROM (SELECT \(descriptor.column) AS previous FROM books WHERE id = ?3) AS before",
                ", before.previous"
            )
        }
    }
}

extension BookPatch {
    /// When the patch sets exactly one field: that field and its new value.
    fileprivate var singleField: (BookField, FieldValue)? {
        guard values.count == 1, let (field, value) = values.first else { return nil }
        return (field, value)
    }
}
