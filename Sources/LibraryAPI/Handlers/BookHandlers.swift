import APICore
import HTTPServer
import JSON
import LibraryDomain

extension LibraryAPI {
    /// `GET /books` (filtered by the table's filterable fields, searched with `q`, sorted with
    /// `sort`) or `GET /libraries/{id}/books`.
    func listBooks(in libraryID: String?, _ exchange: Exchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        let limit = try query.limit()
        let fields = try FieldSelection<BookField>(parsing: query.string("fields"))
        let filter = try query.bookFilter(in: libraryID)
        let order = try query.order(of: BookField.self)
        let (start, books) = (try query.start(in: order), BookQuery(filter, search: try query.search(), order: order))
        let rights = exchange.principal.rights
        if libraryID == nil { try rights.checkReadable(filteredBy: filter.library) }
        exchange.read(libraryID.map { "library \($0)" } ?? "book") { reader in
            if let libraryID, try reader.library(id: libraryID) == nil || !rights.reads(libraryID) {
                throw StoreError(.notFound)
            }
            let page = try reader.books(books, after: start, limit: limit, among: rights.readable)
            var json = JSONWriter(capacity: 64 + page.items.count * 300)
            json.page(page, order: order) { $0.book($1, fields) }
            return .json(.ok, json.bytes)
        }
    }

    func getBook(_ id: String, _ exchange: Exchange) throws(APIError) {
        let fields = try FieldSelection<BookField>(parsing: QueryParameters(exchange.request.query).string("fields"))
        let ifNoneMatch = exchange.request.headers["if-none-match"]
        _ = try EntityTag.noneMatchHits(ifNoneMatch, version: 0)  // reject a malformed header before reading
        let rights = exchange.principal.rights
        exchange.read("book \(id)") { reader in
            guard let book = try reader.book(id: id), rights.reads(book.library) else { throw StoreError(.notFound) }
            if try EntityTag.noneMatchHits(ifNoneMatch, version: book.version) {
                return HTTPResponse(
                    status: .notModified, headers: HTTPHeaders([("ETag", EntityTag.header(book.version))]))
            }
            var json = JSONWriter()
            json.book(book, fields)
            return .json(.ok, json.bytes, version: book.version)
        }
    }

    /// `POST /books`, or `POST /libraries/{id}/books` (404 when that library does not exist).
    func createBook(in libraryID: String?, _ exchange: Exchange) throws(APIError) {
        let draft = try BodyDecoding.bookDraft(exchange.request, pathLibraryID: libraryID)
        try exchange.create(libraryID.map { "library \($0)" } ?? "book") { writer in
            if let libraryID, try writer.reader.library(id: libraryID) == nil || !writer.rights.reads(libraryID) {
                throw StoreError(.notFound)
            }
            return try writer.createBook(draft)
        } respond: { book in
            var json = JSONWriter()
            json.book(book)
            var response = HTTPResponse.json(.created, json.bytes, version: book.version)
            response.headers.add("Location", "/books/\(book.id)")
            return response
        }
    }

    func replaceBook(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        let draft = try BodyDecoding.bookDraft(exchange.request)
        updateBook(id, exchange) { try $0.updateBook(id: id, if: precondition) { _ in draft } }
    }

    func patchBook(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        let patch = try BodyDecoding.bookPatch(exchange.request)
        // Said ahead when it is one statement, so PostgreSQL's writer can pipeline it with others.
        let plan = LibraryWriter.singleFieldWrite(id: id, if: precondition, patch)
        updateBook(id, exchange, plan: plan) { try $0.patchBook(id: id, if: precondition, patch, plan: plan) }
    }

    private func updateBook(
        _ id: String,
        _ exchange: Exchange,
        plan: SingleFieldWrite? = nil,
        _ update: @escaping @Sendable (LibraryWriter) throws -> BookRecord
    ) {
        exchange.write("book \(id)", update, plan: plan) { (book: BookRecord) in
            var json = JSONWriter()
            json.book(book)
            return .json(.ok, json.bytes, version: book.version)
        }
    }

    func deleteBook(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        exchange.write("book \(id)") { writer in
            _ = try writer.deleteBook(id: id, if: precondition)
        } respond: { _ in
            HTTPResponse(status: .noContent)
        }
    }
}
