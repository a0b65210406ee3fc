import LibraryDomain
import SQLite

/// Queries over one connection, of either engine. Used only inside a store's `read` or `write`.
package struct LibraryReader {
    let session: SQLSession

    init(session: SQLSession) {
        self.session = session
    }

    init(connection: Connection) {
        self.session = .sqlite(connection)
    }

    static let libraryColumns = "seq, id, name, address, book_count, version, created_at, updated_at"
    static let bookColumns =
        "seq, id, library_id, title, author, isbn, published_year, available, version, created_at, updated_at"

    /// Succeeds when the database answers a query.
    package func ping() throws {
        _ = try session.first("SELECT 1") { $0.int(0) }
    }

    package func library(id: String) throws -> LibraryRecord? {
        try session.first("SELECT \(Self.libraryColumns) FROM libraries WHERE id = ?", [.text(id)], Self.library)
    }

    /// Libraries after `seq`, in insertion order.
    package func libraries(after seq: Int, limit: Int) throws -> Page<LibraryRecord> {
        let rows = try session.map(
            "SELECT \(Self.libraryColumns) FROM libraries WHERE seq > ? ORDER BY seq LIMIT ?",
            [.int(seq), .int(limit + 1)], Self.library)
        return Self.page(rows, limit: limit, seq: \.seq)
    }

    package func book(id: String) throws -> BookRecord? {
        try session.first("SELECT \(Self.bookColumns) FROM books WHERE id = ?", [.text(id)], Self.book)
    }

    /// Books matching `filter` after `seq`, in insertion order.
    package func books(_ filter: BookFilter, after seq: Int, limit: Int) throws -> Page<BookRecord> {
        let (sql, values) = Self.booksQuery(filter, after: seq, limit: limit)
        let rows = try session.map(sql, values, Self.book)
        return Self.page(rows, limit: limit, seq: \.seq)
    }

    /// The SQL and values of one filtered page of books, in `seq` order.
    ///
    /// Every combination of filters has an index of its equality columns followed by `seq`
    /// (Migrations/0001 and 0003), which a test checks with `EXPLAIN QUERY PLAN`.
    package static func booksQuery(_ filter: BookFilter, after seq: Int, limit: Int) -> (String, [SQLiteValue]) {
        var conditions = ["seq > ?"]
        var values: [SQLiteValue] = [.int(seq)]
        if let libraryId = filter.libraryId {
            conditions.append("library_id = ?")
            values.append(.text(libraryId))
        }
        if let author = filter.author {
            conditions.append("author = ?")
            values.append(.text(author))
        }
        if let available = filter.available {
            conditions.append("available = ?")
            values.append(.bool(available))
        }
        values.append(.int(limit + 1))
        let sql =
            "SELECT \(bookColumns) FROM books WHERE \(conditions.joined(separator: " AND ")) ORDER BY seq LIMIT ?"
        return (sql, values)
    }

    private static func page<T>(_ rows: [T], limit: Int, seq: KeyPath<T, Int>) -> Page<T> {
        guard rows.count > limit else { return Page(items: rows, next: nil) }
        let items = Array(rows.prefix(limit))
        return Page(items: items, next: items.last![keyPath: seq])
    }

    static func library(_ row: SQLRow) -> LibraryRecord {
        LibraryRecord(
            id: row.text(1),
            name: row.text(2),
            address: row.optionalText(3),
            bookCount: row.int(4),
            version: row.int(5),
            createdAt: row.text(6),
            updatedAt: row.text(7),
            seq: row.int(0)
        )
    }

    static func book(_ row: SQLRow) -> BookRecord {
        BookRecord(
            id: row.text(1),
            libraryId: row.text(2),
            title: row.text(3),
            author: row.text(4),
            isbn: row.optionalText(5),
            publishedYear: row.optionalInt(6),
            available: row.bool(7),
            version: row.int(8),
            createdAt: row.text(9),
            updatedAt: row.text(10),
            seq: row.int(0)
        )
    }
}
