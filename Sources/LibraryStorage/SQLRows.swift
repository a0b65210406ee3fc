import LibraryDomain
import SQLite

/// The rows of a write on either SQL engine (`SQLSession`): what `LibraryWriter`'s rules run on
/// inside one transaction of `SQLiteLibraryStore` or `PGWriter`.
/// Used by the one thread that runs the write.
final class SQLRows: RecordRows {
    let session: SQLSession
    /// The outcome of this write's single-field statement, already run by `PGWriter` in a pipeline
    /// with others: `.some(nil)` when it changed no row. Taken by `updateSingleField` instead of
    /// running the statement; nil once taken.
    var prefetched: SQLRow??

    init(session: SQLSession, prefetched: SQLRow?? = nil) {
        self.session = session
        self.prefetched = prefetched
    }

    private var reader: SQLReader { SQLReader(session: session) }

    func ping() throws { try reader.ping() }
    func library(id: String) throws -> LibraryRecord? { try reader.library(id: id) }
    func libraries(sortedBy order: ListOrder<LibraryField>?, after start: ListStart, limit: Int, among: Set<String>?)
        throws -> Page<LibraryRecord>
    {
        try reader.libraries(sortedBy: order, after: start, limit: limit, among: among)
    }
    func book(id: String) throws -> BookRecord? { try reader.book(id: id) }
    func books(_ query: BookQuery, after start: ListStart, limit: Int, among: Set<String>?) throws -> Page<BookRecord> {
        try reader.books(query, after: start, limit: limit, among: among)
    }
    func rememberedAnswer(forKey key: String, now: Int) throws -> RememberedAnswer? {
        try reader.rememberedAnswer(forKey: key, now: now)
    }

    func insertLibrary(_ draft: LibraryDraft, id: String, now: String) throws -> LibraryRecord {
        try insert(draft, id: id, into: Tables.libraries, now: now)
    }

    func insertBook(_ draft: BookDraft, id: String, now: String) throws -> BookRecord {
        try insert(draft, id: id, into: Tables.books, now: now)
    }

    func updateLibrary(id: String, changing changed: [LibraryField], to draft: LibraryDraft, now: String) throws
        -> LibraryRecord
    {
        try update(id, changing: changed, to: draft, in: Tables.libraries, now: now)
    }

    func updateBook(id: String, changing changed: [BookField], to draft: BookDraft, now: String) throws -> BookRecord {
        try update(id, changing: changed, to: draft, in: Tables.books, now: now)
    }

    func deleteLibrary(id: String) throws -> [BookRecord] {
        let books = try reader.allBooks(inLibrary: id)
        try session.run("DELETE FROM libraries WHERE id = ?", [.text(id)])  // its books go with it (ON DELETE CASCADE)
        return books
    }

    func deleteBook(id: String) throws {
        try session.run("DELETE FROM books WHERE id = ?", [.text(id)])
    }

    func adjustBookCount(ofLibrary id: String, by delta: Int, now: String) throws -> LibraryRecord? {
        try session.first(
            """
            UPDATE libraries SET book_count = book_count + ?, version = version + 1, updated_at = ? WHERE id = ?
            RETURNING \(Tables.libraries.columns)
            """, [.int(delta), .text(now), .text(id)], SQLReader.library)
    }

    /// One `UPDATE … RETURNING` with no read before it: it sets the field only where the row
    /// exists, passes the precondition and holds another value, so a row back means exactly that
    /// field changed, and no row that nothing did.
    ///
    /// A field lists filter by also needs its value before the change: a boolean's is the other
    /// value (`LibraryWriter` knows it); on PostgreSQL any other comes back from the same
    /// statement, read from the row as the statement found it (`FROM (SELECT …) AS before`).
    /// SQLite's `RETURNING` sees only the new row, so there such a field takes the general path
    /// (which reads first, in the process, no round trip), as does a move (it changes two
    /// libraries) and a precondition of more than 8 tags (each count is a statement of its own,
    /// prepared and kept).
    ///
    /// Being one statement that either is the whole write or changes nothing, it can be sent ahead
    /// of time: PostgreSQL's writer pipelines the statements of a batch's writes that came with a
    /// plan (`SingleFieldWrite`, `singleFieldStatement`), and hands each its row (`prefetched`).
    func updateSingleField(_ write: SingleFieldWrite, now: String) throws -> SingleFieldUpdate {
        guard let (sql, values) = Self.singleFieldStatement(write, now: now, on: session.engine) else {
            return .unsupported
        }
        let field = write.field
        let returnsPrevious = Self.previousValueSQL(field, on: session.engine)?.returning.isEmpty == false
        /// The book, and the field's value before when the statement returns it.
        func decode(_ row: SQLRow) -> (BookRecord, FieldValue?) {
            let shape = FieldShape(kind: field.descriptor.kind, nullable: true)
            return (SQLReader.book(row), returnsPrevious ? row.value(Self.previousColumn, shape) : nil)
        }
        let row: (BookRecord, FieldValue?)?
        if let prefetched {
            row = prefetched.map(decode)
            self.prefetched = nil
        } else {
            row = try session.first(sql, values, decode)
        }
        guard let (book, previousValue) = row else { return .unchanged }
        return .updated(book, previous: previousValue)
    }

    /// The one statement a single-field write is on `engine`, or nil when it has none there.
    static func singleFieldStatement(_ write: SingleFieldWrite, now: String, on engine: SQLSession.Engine)
        -> (sql: String, values: [SQLiteValue])?
    {
        if case .versions(let versions) = write.precondition, versions.count > 8 { return nil }
        guard let previous = previousValueSQL(write.field, on: engine) else { return nil }
        let column = write.field.descriptor.column
        var sql =
            "UPDATE books SET \(column) = ?1, version = version + 1, updated_at = ?2\(previous.from) WHERE id = ?3"
        var values: [SQLiteValue] = [SQLiteValue(write.value), .text(now), .text(write.book)]
        if case .versions(let versions) = write.precondition {
            // No version can match an empty list (`If-Match` naming only tags that are not
            // versions); PostgreSQL has no `IN ()`.
            sql +=
                versions.isEmpty
                ? " AND 1 = 0"
                : " AND version IN (\(versions.indices.map { "?\($0 + 4)" }.joined(separator: ", ")))"
            values += versions.map { .int($0) }
        }
        sql += " AND \(column) IS DISTINCT FROM ?1 RETURNING \(Tables.books.columns)\(previous.returning)"
        return (sql, values)
    }

    /// Inserts a new resource made of `draft`.
    private func insert<Record>(_ draft: Record.Draft, id: String, into table: RecordTable<Record>, now: String) throws
        -> Record
    {
        try session.first(table.insert, table.insertValues(id: id, draft, now: now), table.record)!
    }

    /// Sets the `changed` fields (only those, so the indexes on the others are left alone), counts
    /// a version and stamps the time.
    private func update<Record>(
        _ id: String, changing changed: [Record.Field], to draft: Record.Draft, in table: RecordTable<Record>,
        now: String
    ) throws -> Record {
        let set = changed.map { "\($0.descriptor.column) = ?" } + ["version = version + 1", "updated_at = ?"]
        return try session.first(
            "UPDATE \(table.name) SET \(set.joined(separator: ", ")) WHERE id = ? RETURNING \(table.columns)",
            changed.map { SQLiteValue(draft[$0]) } + [.text(now), .text(id)],
            table.record)!
    }

    /// Where a single-field statement returns the field's value before the change: right after
    /// the book's columns (`seq` and every field's).
    private static let previousColumn = Int32(BookField.allCases.count + 1)

    /// What a single-field statement of `field` adds to return the field's value before the
    /// change, when collection streams need it (`ChangeItem.book`'s `before`): nothing for a field
    /// no list filters by, or a boolean (the other value); on PostgreSQL a subquery of the row as
    /// the statement found it. Nil when the field cannot take the one-statement path here: such a
    /// field on SQLite, or a move (it changes two libraries).
    private static func previousValueSQL(_ field: BookField, on engine: SQLSession.Engine)
        -> (from: String, returning: String)?
    {
        let descriptor = field.descriptor
        guard descriptor.filterable, descriptor.kind != .boolean else { return ("", "") }
        guard field != BookField.library else { return nil }
        switch engine {
        case .sqlite: return nil
        case .postgres:
            return (
                " FROM (SELECT \(descriptor.column) AS previous FROM books WHERE id = ?3) AS before",
                ", before.previous"
            )
        }
    }
}

extension LibraryWriter {
    /// A writer over `session`'s rows.
    convenience init(session: SQLSession) {
        self.init(rows: SQLRows(session: session))
    }
}
