import Foundation
import Hummingbird
import PostgresNIO

/// GET and PATCH /books/{id} over a `PostgresClient`, one statement per request.
struct BookController: Sendable {
    let client: PostgresClient

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("books/:id", use: getBook)
        router.patch("books/:id", use: patchBook)
    }

    /// The id in the path, lowercased; 400 when it is not a UUID, as library-server answers.
    private func id(_ context: BasicRequestContext) throws -> String {
        let text = try context.parameters.require("id")
        guard text.utf8.count == 36, UUID(uuidString: text) != nil else {
            throw Problem.badRequest("\"\(text)\" is not a valid book id (a UUID).")
        }
        return text.lowercased()
    }

    private func tagged(_ book: Book) -> EditedResponse<Book> {
        EditedResponse(headers: [.eTag: "\"\(book.version)\""], response: book)
    }

    private func first(_ rows: PostgresRowSequence) async throws -> Book? {
        for try await row in rows { return try Book(row: row) }
        return nil
    }

    @Sendable func getBook(_ request: Request, context: BasicRequestContext) async throws -> EditedResponse<Book> {
        let id = try self.id(context)
        let rows = try await client.query("SELECT \(unescaped: Book.columns) FROM books WHERE id = \(id)")
        guard let book = try await first(rows) else { throw Problem.notFound("book \(id)") }
        return tagged(book)
    }

    @Sendable func patchBook(_ request: Request, context: BasicRequestContext) async throws -> EditedResponse<Book> {
        let id = try self.id(context)
        let versions = try ifMatch(request.headers[.ifMatch])
        let patch = try await request.decode(as: BookPatch.self, context: context)
        guard let title = patch.title else {
            // An empty patch changes nothing: the book as it is, subject to If-Match.
            let rows = try await client.query("SELECT \(unescaped: Book.columns) FROM books WHERE id = \(id)")
            guard let book = try await first(rows) else { throw Problem.notFound("book \(id)") }
            if let versions, !versions.contains(book.version) { throw Problem.preconditionFailed("book \(id)") }
            return tagged(book)
        }
        let now = timestamp()
        let rows: PostgresRowSequence
        if let versions {
            rows = try await client.query(
                """
                UPDATE books SET title = \(title), version = version + 1, updated_at = \(now)
                WHERE id = \(id) AND version = ANY(\(versions)) RETURNING \(unescaped: Book.columns)
                """)
        } else {
            rows = try await client.query(
                """
                UPDATE books SET title = \(title), version = version + 1, updated_at = \(now)
                WHERE id = \(id) RETURNING \(unescaped: Book.columns)
                """)
        }
        if let book = try await first(rows) { return tagged(book) }
        if versions != nil,
            try await first(client.query("SELECT \(unescaped: Book.columns) FROM books WHERE id = \(id)")) != nil
        {
            throw Problem.preconditionFailed("book \(id)")
        }
        throw Problem.notFound("book \(id)")
    }

    /// `If-Match` as the versions it accepts (nil: any, the header absent or `*`). Strong tags of
    /// decimal versions only; a malformed header is a 400.
    private func ifMatch(_ header: String?) throws -> [Int]? {
        guard let header else { return nil }
        if header.trimmingCharacters(in: .whitespaces) == "*" { return nil }
        var versions: [Int] = []
        for element in header.split(separator: ",") {
            let tag = element.trimmingCharacters(in: .whitespaces)
            if tag.isEmpty { continue }
            let weak = tag.hasPrefix("W/")
            let quoted = weak ? tag.dropFirst(2) : Substring(tag)
            guard quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"") else {
                throw Problem.badRequest("If-Match and If-None-Match take entity tags such as \"3\", or *.")
            }
            let opaque = quoted.dropFirst().dropLast()
            if !weak, let version = Int(opaque), String(version) == opaque { versions.append(version) }
        }
        return versions
    }
}
