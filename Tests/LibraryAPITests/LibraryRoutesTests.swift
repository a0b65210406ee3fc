import Foundation
import TestSupport
import Testing

@Suite struct LibraryRoutesTests {
    let live = try! LiveServer()

    @Test func libraries_CreateReadReplacePatchDelete() throws {
        let created = try live.request("POST", "/libraries", body: #"{"name":"Central","address":"1 Main St"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect(created.header("location") == "/libraries/\(id)")
        #expect(created.header("etag") == "\"1\"")
        #expect(created.json["bookCount"] as? Int == 0)
        #expect((created.json["createdAt"] as? String)?.hasSuffix("Z") == true)

        let read = try live.request("GET", "/libraries/\(id)")
        #expect(read.status == 200)
        #expect(read.json["name"] as? String == "Central")
        #expect(read.header("content-type") == "application/json")

        let replaced = try live.request("PUT", "/libraries/\(id)", body: #"{"name":"Branch"}"#)
        #expect(replaced.status == 200)
        #expect(replaced.json["name"] as? String == "Branch")
        #expect(replaced.json["address"] is NSNull)  // PUT replaces: the absent address is cleared
        #expect(replaced.header("etag") == "\"2\"")

        let patched = try live.request(
            "PATCH", "/libraries/\(id)", headers: ["Content-Type": "application/merge-patch+json"],
            body: #"{"address":"2 High St","version":99,"id":"ignored"}"#
        )
        #expect(patched.status == 200)
        #expect(patched.json["name"] as? String == "Branch")
        #expect(patched.json["address"] as? String == "2 High St")
        #expect(patched.json["version"] as? Int == 3)
        #expect(patched.json["id"] as? String == id)

        let cleared = try live.request("PATCH", "/libraries/\(id)", body: #"{"address":null}"#)
        #expect(cleared.json["address"] is NSNull)

        #expect(try live.request("DELETE", "/libraries/\(id)").status == 204)
        #expect(try live.request("GET", "/libraries/\(id)").status == 404)
        #expect(try live.request("DELETE", "/libraries/\(id)").status == 404)
    }

    @Test func libraries_ListWithFieldsAndPaging() throws {
        for index in 0..<5 { _ = try live.createLibrary("L\(index)") }
        let first = try live.request("GET", "/libraries?limit=2&fields=name")
        #expect(first.status == 200)
        let items = try #require(first.json["items"] as? [[String: Any]])
        #expect(items.count == 2)
        #expect(Set(items[0].keys) == ["id", "name"])
        let cursor = try #require(first.json["nextCursor"] as? String)
        let rest = try live.request("GET", "/libraries?limit=500&cursor=\(cursor)")
        #expect((rest.json["items"] as? [[String: Any]])?.count == 3)
        #expect(rest.json["nextCursor"] is NSNull)
    }

    @Test func library_DeleteRemovesItsBooks() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library)
        #expect(try live.request("DELETE", "/libraries/\(library)").status == 204)
        #expect(try live.request("GET", "/books/\(book)").status == 404)
    }

    @Test func library_BooksRouteListsAndCreatesInThatLibrary() throws {
        let library = try live.createLibrary()
        let other = try live.createLibrary("Other")
        _ = try live.createBook(in: other)
        let created = try live.request(
            "POST", "/libraries/\(library)/books", body: #"{"title":"Emma","author":"Austen"}"#)
        #expect(created.status == 201)
        #expect(created.json["libraryId"] as? String == library)
        #expect(created.json["author"] as? String == "Austen")
        #expect(created.json["available"] as? Bool == true)
        #expect(created.json["isbn"] is NSNull)
        let listed = try live.request("GET", "/libraries/\(library)/books")
        #expect((listed.json["items"] as? [[String: Any]])?.map { $0["title"] as? String } == ["Emma"])
        let mismatch = try live.request(
            "POST", "/libraries/\(library)/books", body: #"{"title":"x","libraryId":"\#(other)"}"#)
        #expect(mismatch.status == 422)
        let missing = UUID().uuidString.lowercased()
        #expect(try live.request("POST", "/libraries/\(missing)/books", body: #"{"title":"x"}"#).status == 404)
        #expect(try live.request("GET", "/libraries/\(missing)/books").status == 404)
    }

    @Test func library_BookCountAndVersionFollowItsBooks() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library)
        let afterAdd = try live.request("GET", "/libraries/\(library)")
        #expect(afterAdd.json["bookCount"] as? Int == 1)
        #expect(afterAdd.header("etag") == "\"2\"")
        #expect(try live.request("DELETE", "/books/\(book)").status == 204)
        #expect(try live.request("GET", "/libraries/\(library)").json["bookCount"] as? Int == 0)
    }
}
