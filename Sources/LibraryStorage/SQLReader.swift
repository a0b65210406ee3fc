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

    /// Libraries after `seq`, in insertion order.
    package func libraries(after seq: Int, limit: Int) throws -> Page<LibraryRecord> {
        let rows = try session.map(
            "SELECT \(Tables.libraries.columns) FROM libraries WHERE seq > ? ORDER BY seq LIMIT ?",
            [.int(seq), .int(limit + 1)], Self.library)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    package func book(id: String) throws -> BookRecord? {
        try session.first("SELECT \(Tables.books.columns) FROM books WHERE id = ?", [.text(id)], Self.book)
    }

    /// Books matching `filter` after `seq`, in insertion order.
    package func books(_ filter: BookFilter, after seq: Int, limit: Int) throws -> Page<BookRecord> {
        let (sql, values) = Self.booksQuery(filter, after: seq, limit: limit)
        let rows = try session.map(sql, values, Self.book)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    /// The SQL and values of one filtered page of books, in `seq` order.
    ///
    /// Every combination of filters has an index of its equality columns followed by `seq`
    /// (Migrations/0001 and 0003), which a test checks with `EXPLAIN QUERY PLAN`.
    package static func booksQuery(_ filter: BookFilter, after seq: Int, limit: Int) -> (String, [SQLiteValue]) {
        var conditions = ["seq > ?"]
        var values: [SQLiteValue] = [.int(seq)]
        for (field, value) in filter.conditions {
            conditions.append("\(field.descriptor.column) = ?")
            values.append(SQLiteValue(value))
        }
        values.append(.int(limit + 1))
        let sql =
            "SELECT \(Tables.books.columns) FROM books WHERE \(conditions.joined(separator: " AND ")) ORDER BY seq LIMIT ?"
        return (sql, values)
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
