import Foundation
import TestSupport
import Testing

/// If-Match / If-None-Match by RFC 9110's grammar, check order, and the cursor's documented shape:
/// cases schemathesis found where the server and openapi.yaml disagreed.
@Suite struct ConditionalRequestTests {
    @Test(arguments: [
        (#""1""#, 200),
        (#"W/"1""#, 412),  // weak tags never match If-Match
        (#""x,y", "1""#, 200),  // a comma inside the quotes belongs to the tag
        (#" , "7",, "1" ,"#, 200),  // empty list elements are allowed
        (#""2", W/"x""#, 412),
        ("*", 200),
        ("0", 400),
        (#""1"  "2""#, 400),
        (#""unterminated"#, 400),
        (#"*, "1""#, 400),
        (#""+1""#, 412),  // strong comparison is exact text, not numeric
        (#""01""#, 412),
        (#""1.0""#, 412),
        (#""+1", "1""#, 200),
        // Percent-encoded as a whole, as swift-openapi-runtime sends header values.
        ("%221%22", 200),
        ("%222%22", 412),
        ("W%2F%221%22", 400),  // only a value that starts with % is decoded
        ("%2", 400),
        ("%2A", 200),
    ])
    func ifMatch_FollowsTheEntityTagGrammar(header: String, status: Int) throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        let response = try live.request(
            "PATCH", "/libraries/\(library)", headers: ["If-Match": header], body: #"{"address":"1 Main St"}"#)
        #expect(response.status == status, "If-Match: \(header)")
    }

    @Test func ifNoneMatch_ComparesWeakly() throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #"W/"1""#]).status == 304)
        #expect(
            try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #""a,1", "1""#]).status == 304)
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #""2""#]).status == 200)
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #""+1""#]).status == 200)
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #"W/"01""#]).status == 200)
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": "1"]).status == 400)
        #expect(try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": "%221%22"]).status == 304)
    }

    @Test func unacceptableValues_AreA422EvenWhenIfMatchIsStale() throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        let book = try live.createBook(in: library)
        let stale = ["If-Match": #""99""#]
        #expect(
            try live.request("PUT", "/books/\(book)", headers: stale, body: #"{"title":"","libraryId":"\#(library)"}"#)
                .status == 422)
        let unknownLibrary = #"{"libraryId":"3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b"}"#
        #expect(try live.request("PATCH", "/books/\(book)", headers: stale, body: unknownLibrary).status == 422)
        #expect(try live.request("PATCH", "/libraries/\(library)", headers: stale, body: #"{"name":""}"#).status == 422)
        #expect(
            try live.request("PATCH", "/libraries/\(library)", headers: stale, body: #"{"name":"New"}"#).status == 412)
        #expect(try live.request("GET", "/books/\(book)").json["version"] as? Int == 1)
    }

    @Test func cursor_OfTheDocumentedShapeIsAPosition() throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        for title in ["A", "B", "C"] { _ = try live.createBook(in: library, title: title) }
        let first = try live.request("GET", "/books?limit=2")
        let cursor = try #require(first.json["nextCursor"] as? String)
        #expect(cursor.range(of: "^c[0-9a-z]{1,12}$", options: .regularExpression) != nil)
        let rest = try live.request("GET", "/books?limit=2&cursor=\(cursor)")
        #expect((rest.json["items"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["C"])
        #expect((try live.request("GET", "/books?cursor=c0").json["items"] as? [Any])?.count == 3)
        #expect((try live.request("GET", "/books?cursor=czzzzzzzzzzzz").json["items"] as? [Any])?.count == 0)
        for bad in ["c", "c-1", "C1", "czzzzzzzzzzzzz", "djE6Mg", "c1%00"] {
            #expect(try live.request("GET", "/books?cursor=\(bad)").status == 400, "cursor=\(bad)")
        }
    }
}
