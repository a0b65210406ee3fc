import Foundation
import LibraryDomain
import LibraryStorage
import PostgreSQL
import SQLite
import Testing

private let postgresBase = ProcessInfo.processInfo.environment["LIBRARY_TEST_POSTGRES"]

/// The plans PostgreSQL makes for sorted and searched pages (Migrations/postgres/0005), as
/// `SQLiteQueryPlanTests` checks SQLite's: each an index of its own, never a sort of a library.
/// The tables here are empty, so the scans an empty table makes cheapest are turned off: the test
/// asks whether an index serves the query in the order asked, which is what the planner picks at a
/// library's real size (the benchmark's plans, at 1,000,000 books, are in the README).
@Suite(.enabled(if: postgresBase != nil, "set LIBRARY_TEST_POSTGRES, or run scripts/postgres-tests.sh"))
struct PostgresListPlanTests {
    @Test func `sorted pages are a range of their key's index, and a search reads the trigram indexes`() throws {
        let base = postgresBase!
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try PGConnection(base).execute("CREATE SCHEMA \(name)")
        defer {
            _ = try? PGConnection(base).executeScript("SET client_min_messages = warning; DROP SCHEMA \(name) CASCADE")
        }
        let uri = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(name)"
        let store = try PostgresLibraryStore(uri: uri)
        defer { store.close() }
        let connection = try PGConnection(uri)
        try connection.execute("SET enable_seqscan = off")
        try connection.execute("SET enable_bitmapscan = off")  // an empty table's range is as cheap sorted
        let session = SQLSession.postgres(connection)
        func plan(_ query: (String, [SQLiteValue])) throws -> String {
            try session.map("EXPLAIN " + query.0, query.1, planEachTime: true) { $0.text(0) }.joined(separator: " | ")
        }
        let indexes: [BookField: String] = [
            .title: "title", .author: "author_id", .publishedYear: "published_year", .createdAt: "created_at",
            .updatedAt: "updated_at",
        ]
        for (field, index) in indexes {
            for order in [ListOrder(field), ListOrder(field, descending: true)] {
                for library in [nil, "3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b"] {
                    let key: FieldValue = field == .publishedYear ? .int(1965) : .string("dune")
                    for start in [ListStart.sorted(nil), .sorted(SortPosition(key: key, id: "b"))] {
                        let text = try plan(
                            SQLReader.booksQuery(
                                BookQuery(
                                    BookFilter([.libraryId: library.map(FieldValue.string)].compactMapValues { $0 }),
                                    order: order),
                                after: start, limit: 50, among: nil, .postgres))
                        let expected = "using books_by_\(library == nil ? "" : "library_")\(index) on books"
                        #expect(text.contains(expected), "\(order.text): \(text)")
                        #expect(!text.contains("Sort"), "\(order.text): \(text)")
                    }
                }
            }
        }
        let libraries: [LibraryField: String] = [
            .name: "name", .createdAt: "created_at", .updatedAt: "updated_at", .bookCount: "book_count",
        ]
        for (field, index) in libraries {
            let key: FieldValue = field == .bookCount ? .int(3) : .string("x")
            let text = try plan(
                SQLReader.librariesQuery(
                    sortedBy: ListOrder(field, descending: true), after: .sorted(SortPosition(key: key, id: "l")),
                    limit: 50, among: nil, .postgres))
            #expect(text.contains("using libraries_by_\(index) on libraries") && !text.contains("Sort"), "\(text)")
        }
        // Over every book: with a library named, an empty table's statistics make its index as good.
        let search = BookQuery(search: TextSearch("dune"), order: ListOrder(.title))
        // A search's own index; else, on an empty table, the title's index filtered is as cheap.
        try connection.execute("SET enable_indexscan = off")
        try connection.execute("SET enable_bitmapscan = on")
        let text = try plan(SQLReader.booksQuery(search, after: .sorted(nil), limit: 50, among: nil, .postgres))
        #expect(text.contains("Bitmap Index Scan on books_title_trigrams"), "\(text)")
        #expect(text.contains("Bitmap Index Scan on books_author_trigrams"), "\(text)")
    }
}
