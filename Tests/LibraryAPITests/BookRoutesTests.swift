import Foundation
import TestSupport
import Testing

@Suite struct BookRoutesTests {
    let live = try! LiveServer()

    @Test func books_CreateReadReplacePatchDelete() throws {
        let library = try live.createLibrary()
        let created = try live.request(
            "POST", "/books",
            body:
                #"{"libraryId":"\#(library)","title":"Dune","author":"Frank Herbert","isbn":"978-0-441-17271-9","publishedYear":1965,"available":false}"#
        )
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect(created.header("location") == "/books/\(id)")
        #expect(created.json["publishedYear"] as? Int == 1965)
        #expect(created.json["available"] as? Bool == false)

        let replaced = try live.request(
            "PUT", "/books/\(id)", body: #"{"libraryId":"\#(library)","title":"Dune Messiah"}"#)
        #expect(replaced.status == 200)
        #expect(replaced.json["author"] as? String == "")
        #expect(replaced.json["isbn"] is NSNull)
        #expect(replaced.json["available"] as? Bool == true)

        let patched = try live.request("PATCH", "/books/\(id)", body: #"{"publishedYear":-500,"isbn":"0-306-40615-2"}"#)
        #expect(patched.status == 200)
        #expect(patched.json["publishedYear"] as? Int == -500)
        #expect(patched.json["title"] as? String == "Dune Messiah")

        #expect(try live.request("DELETE", "/books/\(id)").status == 204)
        #expect(try live.request("GET", "/books/\(id)").status == 404)
    }

    @Test func book_MovesWhenItsLibraryChanges() throws {
        let a = try live.createLibrary("A")
        let b = try live.createLibrary("B")
        let book = try live.createBook(in: a)
        let moved = try live.request("PATCH", "/books/\(book)", body: #"{"libraryId":"\#(b)"}"#)
        #expect(moved.json["libraryId"] as? String == b)
        #expect(try live.request("GET", "/libraries/\(a)").json["bookCount"] as? Int == 0)
        #expect(try live.request("GET", "/libraries/\(b)").json["bookCount"] as? Int == 1)
        let nowhere = try live.request("PATCH", "/books/\(book)", body: #"{"libraryId":"\#(UUID().uuidString)"}"#)
        #expect(nowhere.status == 422)
        #expect((nowhere.json["errors"] as? [[String: String]])?.first?["field"] == "libraryId")
    }

    /// PostgreSQL's text cannot hold U+0000, so neither engine takes it: never a truncated value
    /// stored, never a filter that matches what it did not name.
    @Test func text_RefusesTheNULCharacterOnEveryEngine() throws {
        let library = try live.createLibrary("A")
        let book = try live.createBook(in: library, title: "a")
        let created = try live.request("POST", "/books", body: #"{"libraryId":"\#(library)","title":"a\u0000b"}"#)
        #expect(created.status == 422)
        #expect((created.json["errors"] as? [[String: String]])?.first?["field"] == "title")
        let patched = try live.request("PATCH", "/books/\(book)", body: #"{"author":"x\u0000"}"#)
        #expect(patched.status == 422)
        let renamed = try live.request("PATCH", "/libraries/\(library)", body: #"{"address":"\u0000"}"#)
        #expect(renamed.status == 422)
        #expect(try live.request("GET", "/books?author=%00").status == 400)
        #expect(try live.request("GET", "/books/events?author=a%00").status == 400)
        let stored = try live.request("GET", "/books/\(book)")
        #expect(stored.json["author"] as? String == "" && stored.json["version"] as? Int == 1)
        let listed = try live.request("GET", "/libraries/\(library)/books").json["items"] as? [[String: Any]]
        #expect(listed?.count == 1)
    }

    @Test func books_FilterByLibraryAuthorAndAvailability() throws {
        let a = try live.createLibrary("A")
        let b = try live.createLibrary("B")
        _ = try live.createBook(in: a, title: "One", extra: #","author":"Le Guin""#)
        _ = try live.createBook(in: a, title: "Two", extra: #","author":"Le Guin","available":false"#)
        _ = try live.createBook(in: b, title: "Three", extra: #","author":"Le Guin""#)
        func titles(_ query: String) throws -> [String] {
            let response = try live.request("GET", "/books?\(query)")
            #expect(response.status == 200)
            return (response.json["items"] as? [[String: Any]])?.compactMap { $0["title"] as? String } ?? []
        }
        #expect(try titles("libraryId=\(a)") == ["One", "Two"])
        #expect(try titles("author=Le%20Guin") == ["One", "Two", "Three"])
        #expect(try titles("author=Le+Guin&available=false") == ["Two"])
        #expect(try titles("libraryId=\(a)&available=true") == ["One"])
        #expect(try live.request("GET", "/books?available=maybe").status == 400)
        #expect(try live.request("GET", "/books?libraryId=nope").status == 400)
    }

    @Test func book_FieldsSelectOnlyWhatWasAsked() throws {
        let book = try live.createBook(in: try live.createLibrary())
        let response = try live.request("GET", "/books/\(book)?fields=title,author")
        #expect(Set(response.json.keys) == ["id", "title", "author"])
        let list = try live.request("GET", "/books?fields=isbn")
        #expect((list.json["items"] as? [[String: Any]])?.allSatisfy { Set($0.keys) == ["id", "isbn"] } == true)
        let unknown = try live.request("GET", "/books/\(book)?fields=title,colour")
        #expect(unknown.status == 400)
        #expect((unknown.json["detail"] as? String)?.contains("publishedYear") == true)
        #expect(try live.request("GET", "/books/\(book)?fields=").status == 400)
    }

    @Test func book_ConditionalRequestsFollowTheETag() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library)
        let current = try live.request("GET", "/books/\(book)")
        let etag = try #require(current.header("etag"))
        #expect(etag == "\"1\"")
        let notModified = try live.request("GET", "/books/\(book)", headers: ["If-None-Match": etag])
        #expect(notModified.status == 304)
        #expect(notModified.header("etag") == etag)
        #expect(try live.request("GET", "/books/\(book)", headers: ["If-None-Match": "W/\"1\""]).status == 304)
        #expect(try live.request("GET", "/books/\(book)", headers: ["If-None-Match": "\"7\""]).status == 200)

        #expect(
            try live.request("PATCH", "/books/\(book)", headers: ["If-Match": "\"9\""], body: #"{"title":"x"}"#).status
                == 412)
        #expect(try live.request("GET", "/books/\(book)").json["title"] as? String == "Dune")  // unchanged
        let ok = try live.request("PATCH", "/books/\(book)", headers: ["If-Match": etag], body: #"{"title":"x"}"#)
        #expect(ok.status == 200)
        #expect(ok.header("etag") == "\"2\"")
        #expect(
            try live.request(
                "PUT", "/books/\(book)", headers: ["If-Match": etag], body: #"{"libraryId":"\#(library)","title":"y"}"#
            ).status == 412)
        #expect(try live.request("DELETE", "/books/\(book)", headers: ["If-Match": etag]).status == 412)
        #expect(try live.request("DELETE", "/books/\(book)", headers: ["If-Match": "*"]).status == 204)
        #expect(try live.request("DELETE", "/books/\(book)", headers: ["If-Match": "*"]).status == 404)
    }

    @Test func book_HeadAnswersHeadersOnly() throws {
        let book = try live.createBook(in: try live.createLibrary())
        let connection = try live.connect()
        let head = try connection.request("HEAD", "/books/\(book)")
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(Int(head.header("content-length") ?? "") ?? 0 > 0)
        #expect(try connection.request("GET", "/books/\(book)").status == 200)  // the connection stays in sync
    }

    @Test func books_PagingLosesAndRepeatsNothingUnderConcurrentInserts() throws {
        let library = try live.createLibrary()
        let original = try (0..<120).map { try live.createBook(in: library, title: "b\($0)") }
        var late: Set<String> = []
        var seen: [String] = []
        var cursor: String?
        repeat {
            let query = "/books?libraryId=\(library)&limit=25" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page = try live.request("GET", query)
            #expect(page.status == 200)
            seen += (page.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
            cursor = page.json["nextCursor"] as? String
            // Another client inserts while this one pages: new books land after everything seen.
            late.insert(try live.createBook(in: library, title: "late"))
        } while cursor != nil
        #expect(Array(seen.prefix(120)) == original, "every book, once, in insertion order")
        #expect(Set(seen).count == seen.count, "no book repeated")
        #expect(Set(seen.dropFirst(120)).isSubset(of: late))
    }
}
