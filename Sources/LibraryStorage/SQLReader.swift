import LibraryDomain
import SQLite

/// Queries over one connection, of either engine. Used only inside a store's `read` or `write`.
package struct SQLReader: LibraryReader {
    let session: SQLSession

    init(session: SQLSession) {
        self.session = session
    }

    init(connection: Connection) {
        self.session = .sqlite(connection)
    }

    /// Succeeds when the database answers a query.
    package func ping() throws {
        _ = try session.first("SELECT 1") { $0.int(0) }
    }

    package func library(id: String) throws -> LibraryRecord? {
        try session.first("SELECT \(Tables.libraries.columns) FROM libraries WHERE id = ?", [.text(id)], Self.library)
    }

    /// Libraries after `seq`, in insertion order; among those ids only, when given.
    package func libraries(after seq: Int, limit: Int, among: Set<String>?) throws -> Page<LibraryRecord> {
        var conditions = ["seq > ?"]
        var values: [SQLiteValue] = [.int(seq)]
        if let among {
            conditions.append(Self.among("id", session.engine))
            values.append(Self.idList(among, session.engine))
        }
        values.append(.int(limit + 1))
        let rows = try session.map(
            "SELECT \(Tables.libraries.columns) FROM libraries WHERE \(conditions.joined(separator: " AND ")) ORDER BY seq LIMIT ?",
            values, Self.library)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    package func book(id: String) throws -> BookRecord? {
        try session.first("SELECT \(Tables.books.columns) FROM books WHERE id = ?", [.text(id)], Self.book)
    }

    /// Books matching `filter` after `seq`, in insertion order.
    package func books(_ filter: BookFilter, after seq: Int, limit: Int, among: Set<String>?) throws -> Page<BookRecord>
    {
        let (sql, values) = Self.booksQuery(filter, after: seq, limit: limit, among: among, session.engine)
        let rows = try session.map(sql, values, Self.book)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    /// The SQL and values of one filtered page of books, in `seq` order.
    ///
    /// Every combination of filters has an index of its equality columns followed by `seq`
    /// (Migrations/0001 and 0003), which a test checks with `EXPLAIN QUERY PLAN`.
    package static func booksQuery(
        _ filter: BookFilter, after seq: Int, limit: Int, among: Set<String>? = nil,
        _ engine: SQLSession.Engine = .sqlite
    ) -> (String, [SQLiteValue]) {
        var conditions = ["seq > ?"]
        var values: [SQLiteValue] = [.int(seq)]
        for (field, value) in filter.conditions {
            conditions.append("\(field.descriptor.column) = ?")
            values.append(SQLiteValue(value))
        }
        if let among {
            conditions.append(Self.among(BookField.libraryId.descriptor.column, engine))
            values.append(idList(among, engine))
        }
        values.append(.int(limit + 1))
        let sql =
            "SELECT \(Tables.books.columns) FROM books WHERE \(conditions.joined(separator: " AND ")) ORDER BY seq LIMIT ?"
        return (sql, values)
    }

    /// `column` is one of the ids of a list given as one parameter (`idList`): a statement of
    /// one text however many ids a principal may read.
    private static func among(_ column: String, _ engine: SQLSession.Engine) -> String {
        switch engine {
        case .sqlite: "\(column) IN (SELECT value FROM json_each(?))"
        case .postgres: "\(column) = ANY (string_to_array(?, ','))"
        }
    }

    /// Ids (canonical UUIDs: no quote, comma or backslash in them) as `among`'s parameter: a
    /// JSON array for SQLite's `json_each`, a comma-separated list for PostgreSQL's `string_to_array`.
    private static func idList(_ ids: Set<String>, _ engine: SQLSession.Engine) -> SQLiteValue {
        let sorted = ids.sorted()
        return switch engine {
        case .sqlite: .text("[" + sorted.map { "\"\($0)\"" }.joined(separator: ",") + "]")
        case .postgres: .text(sorted.joined(separator: ","))
        }
    }

    /// The rows read (one past `limit` when there are more) as a page: trimmed in place, not copied.
    private static func page<T>(_ rows: consuming [T], limit: Int, seq: KeyPath<T, Int>) -> Page<T> {
        guard rows.count > limit else { return Page(items: rows, next: nil) }
        rows.removeLast(rows.count - limit)
        return Page(items: rows, next: rows.last![keyPath: seq])
    }

    static func library(_ row: SQLRow) -> LibraryRecord { Tables.libraries.record(row) }

    static func book(_ row: SQLRow) -> BookRecord { Tables.books.record(row) }
}
