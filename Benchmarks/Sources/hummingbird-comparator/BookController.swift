import Foundation
import Hummingbird

/// The four book routes, as a controller (the shape Hummingbird's examples use).
struct BookController: Sendable {
    let database: Database

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("books/:id", use: getBook)
        router.get("libraries/:id/books", use: listBooks)
        router.post("books", use: createBook)
        router.patch("books/:id", use: patchBook)
    }

    /// The id in the path, which must be a UUID.
    private func id(_ context: BasicRequestContext) throws -> String {
        let text = try context.parameters.require("id")
        guard let uuid = UUID(uuidString: text) else { throw HTTPError(.badRequest, message: "\(text) is not a UUID") }
        return uuid.uuidString.lowercased()
    }

    private func findBook(_ id: String, _ connection: Connection) throws -> Book? {
        try connection.query("SELECT \(Book.columns) FROM books WHERE id = ?", [.text(id)], row: Book.init).first
    }

    private func libraryExists(_ id: String, _ connection: Connection) throws -> Bool {
        try !connection.query("SELECT 1 FROM libraries WHERE id = ?", [.text(id)]) { _ in true }.isEmpty
    }

    private func adjustBookCount(of library: String, by delta: Int, at now: String, _ connection: Connection) throws {
        _ = try connection.query(
            "UPDATE libraries SET book_count = book_count + ?, version = version + 1, updated_at = ? WHERE id = ?",
            [.int(delta), .text(now), .text(library)]
        ) { _ in () }
    }

    private func tagged(_ book: Book, status: HTTPResponse.Status = .ok) -> EditedResponse<Book> {
        EditedResponse(status: status, headers: [.eTag: "\"\(book.version)\""], response: book)
    }

    @Sendable func getBook(_ request: Request, context: BasicRequestContext) async throws -> EditedResponse<Book> {
        let id = try self.id(context)
        guard let book = try database.read({ try findBook(id, $0) }) else { throw HTTPError(.notFound) }
        return tagged(book)
    }

    @Sendable func listBooks(_ request: Request, context: BasicRequestContext) async throws -> BookPage {
        let library = try self.id(context)
        let limit = request.uri.queryParameters.get("limit", as: Int.self) ?? 50
        guard (1...500).contains(limit) else { throw HTTPError(.badRequest, message: "limit must be 1 to 500") }
        var after = 0
        if let cursor = request.uri.queryParameters.get("cursor") {
            guard cursor.hasPrefix("c"), let seq = Int(cursor.dropFirst(), radix: 36) else {
                throw HTTPError(.badRequest, message: "bad cursor")
            }
            after = seq
        }
        let (exists, rows) = try database.read { connection in
            guard try libraryExists(library, connection) else { return (false, [(Book, Int)]()) }
            let rows = try connection.query(
                "SELECT \(Book.columns) FROM books WHERE library_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                [.text(library), .int(after), .int(limit + 1)]
            ) { row in (Book(row: row), row.int(10)) }
            return (true, rows)
        }
        guard exists else { throw HTTPError(.notFound) }
        let page = rows.prefix(limit)
        let next = rows.count > limit ? page.last.map { "c" + String($0.1, radix: 36) } : nil
        return BookPage(items: page.map(\.0), nextCursor: next)
    }

    @Sendable func createBook(_ request: Request, context: BasicRequestContext) async throws -> EditedResponse<Book> {
        let input = try await request.decode(as: NewBook.self, context: context)
        let fields = BookFields(
            libraryId: input.libraryId.lowercased(), title: input.title, author: input.author ?? "", isbn: input.isbn,
            publishedYear: input.publishedYear, available: input.available ?? true
        )
        try fields.validate()
        let book = try database.write { connection -> Book? in
            guard try libraryExists(fields.libraryId, connection) else { return nil }
            let now = timestamp()
            let book = try connection.query(
                """
                INSERT INTO books (id, library_id, title, author, isbn, published_year, available, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING \(Book.columns)
                """,
                [
                    .text(UUID().uuidString.lowercased()), .text(fields.libraryId), .text(fields.title),
                    .text(fields.author), fields.isbn.map { .text($0) } ?? .null,
                    fields.publishedYear.map { .int($0) } ?? .null, .int(fields.available ? 1 : 0), .text(now),
                    .text(now),
                ],
                row: Book.init
            )[0]
            try adjustBookCount(of: fields.libraryId, by: 1, at: now, connection)
            return book
        }
        guard let book else { throw HTTPError(.unprocessableContent, message: "no library has this id") }
        var response = tagged(book, status: .created)
        response.headers[.location] = "/books/\(book.id)"
        return response
    }

    @Sendable func patchBook(_ request: Request, context: BasicRequestContext) async throws -> EditedResponse<Book> {
        let id = try self.id(context)
        let patch = try await request.decode(as: BookPatch.self, context: context)
        let book = try database.write { connection -> Book? in
            guard let current = try findBook(id, connection) else { return nil }
            let old = current.fields
            var new = old
            if let libraryId = patch.libraryId { new.libraryId = libraryId.lowercased() }
            if let title = patch.title { new.title = title }
            if let author = patch.author { new.author = author }
            if let isbn = patch.isbn { new.isbn = isbn }
            if let publishedYear = patch.publishedYear { new.publishedYear = publishedYear }
            if let available = patch.available { new.available = available }
            try new.validate()
            guard new != old else { return current }
            let now = timestamp()
            if new.libraryId != old.libraryId {
                guard try libraryExists(new.libraryId, connection) else {
                    throw HTTPError(.unprocessableContent, message: "no library has this id")
                }
                try adjustBookCount(of: old.libraryId, by: -1, at: now, connection)
                try adjustBookCount(of: new.libraryId, by: 1, at: now, connection)
            }
            return try connection.query(
                """
                UPDATE books SET library_id = ?, title = ?, author = ?, isbn = ?, published_year = ?, available = ?,
                    version = version + 1, updated_at = ?
                WHERE id = ? RETURNING \(Book.columns)
                """,
                [
                    .text(new.libraryId), .text(new.title), .text(new.author), new.isbn.map { .text($0) } ?? .null,
                    new.publishedYear.map { .int($0) } ?? .null, .int(new.available ? 1 : 0), .text(now), .text(id),
                ],
                row: Book.init
            )[0]
        }
        guard let book else { throw HTTPError(.notFound) }
        return tagged(book)
    }
}
