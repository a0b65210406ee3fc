import Foundation
import Hummingbird

/// `GET` and `PATCH /books/{id}` as a Hummingbird user would first write them (`--plain`): one
/// prepared statement per request, no validation, no read before the update, no transaction.
///
/// The second baseline of Benchmarks/run.sh, beside `BookController` (same semantics as
/// library-server): what the simplest correct CRUD server costs, with no change log either.
/// A PATCH sets the fields its body names (a null leaves a field alone, `libraryId` is ignored),
/// bumps the version and answers the updated book, or 404.
struct PlainBookController: Sendable {
    let database: Database

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("books/:id", use: getBook)
        router.patch("books/:id", use: patchBook)
    }

    /// The body of a plain `PATCH /books/{id}`: every field optional.
    struct Patch: Decodable {
        var title: String?
        var author: String?
        var isbn: String?
        var publishedYear: Int?
        var available: Bool?
    }

    @Sendable func getBook(_ request: Request, context: BasicRequestContext) async throws -> Book {
        let id = try context.parameters.require("id")
        let book = try database.read { connection in
            try connection.query("SELECT \(Book.columns) FROM books WHERE id = ?", [.text(id)], row: Book.init).first
        }
        guard let book else { throw HTTPError(.notFound) }
        return book
    }

    @Sendable func patchBook(_ request: Request, context: BasicRequestContext) async throws -> Book {
        let id = try context.parameters.require("id")
        let patch = try await request.decode(as: Patch.self, context: context)
        let book = try database.writeStatement { connection in
            try connection.query(
                """
                UPDATE books SET title = coalesce(?, title), author = coalesce(?, author), isbn = coalesce(?, isbn),
                    published_year = coalesce(?, published_year), available = coalesce(?, available),
                    version = version + 1, updated_at = ?
                WHERE id = ? RETURNING \(Book.columns)
                """,
                [
                    patch.title.map { .text($0) } ?? .null, patch.author.map { .text($0) } ?? .null,
                    patch.isbn.map { .text($0) } ?? .null, patch.publishedYear.map { .int($0) } ?? .null,
                    patch.available.map { .int($0 ? 1 : 0) } ?? .null, .text(timestamp()), .text(id),
                ],
                row: Book.init
            ).first
        }
        guard let book else { throw HTTPError(.notFound) }
        return book
    }
}
