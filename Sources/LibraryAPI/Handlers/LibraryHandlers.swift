import APICore
import HTTPServer
import JSON
import LibraryDomain

extension LibraryAPI {
    func listLibraries(_ exchange: Exchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        let limit = try query.limit()
        let fields = try FieldSelection<LibraryField>(parsing: query.string("fields"))
        let order = try query.order(of: LibraryField.self)
        let start = try query.start(in: order)
        let readable = exchange.principal.rights.readable
        exchange.read("library") { reader in
            let page = try reader.libraries(sortedBy: order, after: start, limit: limit, among: readable)
            var json = JSONWriter(capacity: 64 + page.items.count * 200)
            json.page(page, order: order) { $0.library($1, fields) }
            return .json(.ok, json.bytes)
        }
    }

    func getLibrary(_ id: String, _ exchange: Exchange) throws(APIError) {
        let fields = try FieldSelection<LibraryField>(parsing: QueryParameters(exchange.request.query).string("fields"))
        let ifNoneMatch = exchange.request.headers["if-none-match"]
        _ = try EntityTag.noneMatchHits(ifNoneMatch, version: 0)  // reject a malformed header before reading
        let rights = exchange.principal.rights
        exchange.read("library \(id)") { reader in
            // One the principal cannot read is answered as one that does not exist, after the same read.
            guard let library = try reader.library(id: id), rights.reads(library.id) else {
                throw StoreError(.notFound)
            }
            if try EntityTag.noneMatchHits(ifNoneMatch, version: library.version) {
                return HTTPResponse(
                    status: .notModified, headers: HTTPHeaders([("ETag", EntityTag.header(library.version))]))
            }
            var json = JSONWriter()
            json.library(library, fields)
            return .json(.ok, json.bytes, version: library.version)
        }
    }

    func createLibrary(_ exchange: Exchange) throws(APIError) {
        let draft = try BodyDecoding.libraryDraft(exchange.request)
        try exchange.create("library") { writer in
            try writer.createLibrary(draft)
        } respond: { library in
            var json = JSONWriter()
            json.library(library)
            var response = HTTPResponse.json(.created, json.bytes, version: library.version)
            response.headers.add("Location", "/libraries/\(library.id)")
            return response
        }
    }

    func replaceLibrary(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        let draft = try BodyDecoding.libraryDraft(exchange.request)
        updateLibrary(id, precondition, exchange) { _ in draft }
    }

    func patchLibrary(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        let patch = try BodyDecoding.libraryPatch(exchange.request)
        updateLibrary(id, precondition, exchange) { patch.applied(to: $0) }
    }

    private func updateLibrary(
        _ id: String,
        _ precondition: Precondition,
        _ exchange: Exchange,
        _ change: @escaping @Sendable (LibraryDraft) -> LibraryDraft
    ) {
        exchange.write("library \(id)") { writer in
            try writer.updateLibrary(id: id, if: precondition, change)
        } respond: { library in
            var json = JSONWriter()
            json.library(library)
            return .json(.ok, json.bytes, version: library.version)
        }
    }

    func deleteLibrary(_ id: String, _ exchange: Exchange) throws(APIError) {
        let precondition = try EntityTag.precondition(ifMatch: exchange.request.headers["if-match"])
        exchange.write("library \(id)") { writer in
            _ = try writer.deleteLibrary(id: id, if: precondition)
        } respond: { _ in
            HTTPResponse(status: .noContent)
        }
    }
}
