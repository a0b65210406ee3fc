import Foundation
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import Testing

/// A client generated from openapi.yaml by Apple's swift-openapi-generator 1.14.3 (the code in
/// `Generated/`, made by scripts/generate-openapi-client.sh), used as a Swift developer would:
/// required fields come out non-optional, the server's timestamps decode with
/// `.iso8601WithFractionalSeconds`, and conditional requests work although the runtime
/// percent-encodes header values (`If-Match: %221%22`).
@Suite(.serialized) struct GeneratedClientTests {
    @Test func `a generated client creates, reads and writes conditionally`() async throws {
        let server = try ServerProcess()
        let client = Client(
            serverURL: server.url,
            configuration: .init(dateTranscoder: .iso8601WithFractionalSeconds),
            transport: AsyncHTTPClientTransport()
        )
        let created = try await client.createLibrary(
            headers: .init(idempotencyKey: "generated-1"), body: .json(.init(name: "Central")))
        let library = try created.created.body.json
        // LibraryComplete: every field non-optional (only `address` is nullable).
        let name: String = library.name
        let count: Int = library.bookCount
        #expect(name == "Central" && count == 0 && library.address == nil)
        #expect(library.createdAt <= Date() && library.createdAt > Date().addingTimeInterval(-60))

        let book = try await client.createBook(body: .json(.init(libraryId: library.id, title: "Dune"))).created
            .body.json
        let available: Bool = book.available
        #expect(book.title == "Dune" && available && book.version == 1)

        let fetched = try await client.getBook(path: .init(id: book.id)).ok
        let etag = try #require(fetched.headers.eTag)
        #expect(etag == "\"1\"")
        let patched = try await client.patchBook(
            path: .init(id: book.id), headers: .init(ifMatch: etag), body: .json(.init(title: "Dune Messiah")))
        #expect(try patched.ok.body.json.title == "Dune Messiah")

        let stale = try await client.patchBook(
            path: .init(id: book.id), headers: .init(ifMatch: etag), body: .json(.init(title: "Lost update")))
        guard case .preconditionFailed = stale else {
            Issue.record("a stale If-Match was not refused: \(stale)")
            return
        }
        let deleted = try await client.deleteBook(path: .init(id: book.id), headers: .init(ifMatch: "\"2\""))
        guard case .noContent = deleted else {
            Issue.record("delete answered \(deleted)")
            return
        }
    }
}
