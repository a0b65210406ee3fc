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

    /// A page of libraries in `order` (insertion order when nil) from `start`; among those ids only,
    /// when given.
    package func libraries(
        sortedBy order: ListOrder<LibraryField>?, after start: ListStart, limit: Int, among: Set<String>?
    ) throws -> Page<LibraryRecord> {
        let (sql, values) = Self.librariesQuery(
            sortedBy: order, after: start, limit: limit, among: among, session.engine)
        let rows = try session.map(sql, values, Self.library)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    package func book(id: String) throws -> BookRecord? {
        try session.first("SELECT \(Tables.books.columns) FROM books WHERE id = ?", [.text(id)], Self.book)
    }

    /// A page of the books `query` lists, from `start`.
    package func books(_ query: BookQuery, after start: ListStart, limit: Int, among: Set<String>?) throws
        -> Page<BookRecord>
    {
        if let search = query.search, session.engine == .sqlite {
            // A common text fills the page within the first rows of the list's own order.
            var plain = query
            plain.search = nil
            let (sql, values) = Self.booksQuery(
                plain, after: start, limit: Self.rowsReadInOrder - 1, among: among, session.engine)
            let rows = try session.map(sql, values, Self.book)
            let found = rows.filter(search.matches)
            if found.count > limit || rows.count < Self.rowsReadInOrder {
                return Self.page(found, limit: limit, seq: \.seq)
            }
        }
        let (sql, values) = Self.booksQuery(query, after: start, limit: limit, among: among, session.engine)
        let rows = try session.map(sql, values, planEachTime: query.search != nil, Self.book)
        return Self.page(consume rows, limit: limit, seq: \.seq)
    }

    /// The SQL and values of one page of libraries.
    package static func librariesQuery(
        sortedBy order: ListOrder<LibraryField>?, after start: ListStart, limit: Int, among: Set<String>? = nil,
        _ engine: SQLSession.Engine = .sqlite
    ) -> (String, [SQLiteValue]) {
        var query = Conditions()
        if let among { query.add(Self.among("id", engine), idList(among, engine)) }
        return query.page(of: Tables.libraries.columns, from: "libraries", order, start, limit: limit, engine)
    }

    /// The SQL and values of one page of books.
    ///
    /// - In insertion order, every combination of filters has an index of its equality columns
    ///   followed by `seq` (Migrations/0001 and 0003).
    /// - Sorted, the library (or none) and the sort key have an index ending with `id`
    ///   (Migrations/0009, postgres/0005): a page is a range of it, from the cursor on. The other
    ///   filters are tested on the rows of that range.
    /// - Searched on SQLite (after the first rows of the order, see `rowsReadInOrder`), the rows
    ///   the FTS5 trigram table finds are looked up by `seq`, tested with `LIKE` (ASCII letters
    ///   without case) and sorted.
    ///   On PostgreSQL, `ILIKE` under the "C" collation, with the pg_trgm indexes there for the
    ///   planner, which chooses between them and the order's index from its statistics.
    ///
    /// Tests check each with `EXPLAIN QUERY PLAN` (SQLite) and `EXPLAIN` (PostgreSQL).
    package static func booksQuery(
        _ query: BookQuery, after start: ListStart, limit: Int, among: Set<String>? = nil,
        _ engine: SQLSession.Engine = .sqlite
    ) -> (String, [SQLiteValue]) {
        var conditions = Conditions()
        for (field, value) in query.filter.conditions {
            conditions.add("\(field.descriptor.column) = ?", SQLiteValue(value))
        }
        if let among {
            conditions.add(Self.among(BookField.libraryId.descriptor.column, engine), idList(among, engine))
        }
        var table = "books"
        if let search = query.search {
            let pattern = SQLiteValue.text(search.likePattern)
            switch engine {
            case .sqlite:
                // The search's rows first, whatever other index could serve the order (`CROSS
                // JOIN` keeps the tables in this order).
                table =
                    "(SELECT rowid AS hit FROM books_search WHERE books_search MATCH ?) CROSS JOIN books ON seq = hit"
                conditions.values.insert(.text(search.phrase), at: 0)  // its `?` comes before the WHERE's
                conditions.add(#"(title LIKE ? ESCAPE '\' OR author LIKE ? ESCAPE '\')"#, pattern, pattern)
            case .postgres:
                conditions.add(
                    #"(title COLLATE "C" ILIKE ? ESCAPE '\' OR author ILIKE ? ESCAPE '\')"#, pattern, pattern)
            }
        }
        return conditions.page(of: Tables.books.columns, from: table, query.order, start, limit: limit, engine)
    }

    /// How a searched page is read on SQLite, cheapest first (an FTS5 phrase of common trigrams
    /// costs tens of milliseconds at a million books, a thousand rows of an index about one):
    /// 1. the first `rowsReadInOrder` rows of the list's own order (its index), each tested in
    ///    Swift (`TextSearch.matches`, `LIKE`'s rule): enough when the text is common among them,
    ///    or the list short;
    /// 2. else every row the FTS5 trigram table finds, tested with `LIKE` and sorted: a cost in
    ///    proportion to the books holding the text, never to the library.
    static let rowsReadInOrder = 1_000

    /// A field's sort key as the engine's indexes hold it (`SortKey` says what it is): the
    /// expression lists are ordered by, and how a row value after a cursor compares with it (an
    /// index range on both engines: `(key, id) > (?, ?)`).
    static func sortKey(_ field: FieldDescriptor, _ engine: SQLSession.Engine) -> (
        order: String, compared: String, parameter: String
    ) {
        let column = field.column
        switch (field.kind, engine) {
        // SQLite ranges over a column, so the row value holds the column and the cursor's value
        // carries the index's collation.
        case (.text, .sqlite): return ("\(column) COLLATE NOCASE", column, "? COLLATE NOCASE")
        case (.text, .postgres): return ("lower(\(column) COLLATE \"C\")", "lower(\(column) COLLATE \"C\")", "?")
        case (.timestamp, .postgres): return ("(\(column) COLLATE \"C\")", "(\(column) COLLATE \"C\")", "?")
        case (.integer, .sqlite) where field.nullable: return (column + "_key", column + "_key", "?")
        case (.integer, .postgres) where field.nullable:
            let key = "coalesce(\(column), \(SortKey.missingNumber))"
            return (key, key, "?")
        case (.timestamp, .sqlite), (.integer, _), (.boolean, _), (.identifier, _): return (column, column, "?")
        }
    }

    /// The `WHERE` of a page, built up, and the values of its `?`s in order.
    private struct Conditions {
        var terms: [String] = []
        var values: [SQLiteValue] = []

        mutating func add(_ term: String, _ values: SQLiteValue...) {
            terms.append(term)
            self.values += values
        }

        /// The page's statement: in insertion order after a `seq`, or in `order` after a position
        /// (the row value of the key and the id past the cursor's: one range of the index).
        mutating func page<Field: ResourceField>(
            of columns: String, from table: String, _ order: ListOrder<Field>?, _ start: ListStart, limit: Int,
            _ engine: SQLSession.Engine
        ) -> (String, [SQLiteValue]) {
            let orderBy: String
            if let order {
                let key = SQLReader.sortKey(order.field.descriptor, engine)
                let (direction, beyond) = order.descending ? ("DESC", "<") : ("ASC", ">")
                if let position = start.position {
                    add(
                        "(\(key.compared), id) \(beyond) (\(key.parameter), ?)", SQLiteValue(position.key),
                        .text(position.id))
                }
                orderBy = "\(key.order) \(direction), id \(direction)"
            } else {
                add("seq > ?", .int(start.seq))
                orderBy = "seq"
            }
            values.append(.int(limit + 1))
            let filter = terms.isEmpty ? "" : " WHERE " + terms.joined(separator: " AND ")
            return ("SELECT \(columns) FROM \(table)\(filter) ORDER BY \(orderBy) LIMIT ?", values)
        }
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
