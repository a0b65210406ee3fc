import Foundation
import Glibc
import TestSupport
import Testing

/// `POST /events`: the watches in a JSON body, bare `<seq>` ids, resume named in the body.
@Suite struct PostedWatchStreamTests {
    let live = try! LiveServer()

    static func body(_ watches: [String], lastEventId: String? = nil, resume: [String]? = nil) -> String {
        func list(_ items: [String]) -> String {
            "[" + items.map { "\"" + $0 + "\"" }.joined(separator: ",") + "]"
        }
        var members = ["\"watches\":" + list(watches)]
        if let lastEventId { members.append("\"lastEventId\":\"\(lastEventId)\"") }
        if let resume { members.append("\"resume\":" + list(resume)) }
        return "{" + members.joined(separator: ",") + "}"
    }

    func open(_ body: String) throws -> EventStreamClient {
        try EventStreamClient(port: live.port, path: "/events", body: body)
    }

    @Test func `a stream of more watches than a URL holds has bare sequence ids`() throws {
        let library = try live.createLibrary()
        var books: [String] = []
        for index in 0..<150 { books.append(try live.createBook(in: library, title: "Book \(index)")) }
        let watches = books.map { "/books/\($0)?fields=title" }
        let stream = try open(Self.body(watches))
        #expect(stream.head.status == 200)
        let first = try #require(try stream.next())
        #expect(first.entries.count == 150)
        #expect(first.entries.allSatisfy { $0["event"] as? String == "snapshot" })
        #expect(Int(first.id ?? "") != nil, "a bare <seq>: \(first.id ?? "none")")
        let response = try live.request("PATCH", "/books/\(books[7])", body: #"{"title":"Seven"}"#)
        #expect(response.status == 200)
        let change = try #require(try stream.next())
        #expect(change.entries.count == 1)
        #expect((change.entries.first?["data"] as? [String: Any])?["title"] as? String == "Seven")
        #expect(Int(change.id ?? "")! > Int(first.id ?? "")!)
    }

    @Test func `the watches named to resume resume and the others get their snapshot`() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library, title: "Dune")
        let title = "/books/\(book)?fields=title"
        let author = "/books/\(book)?fields=author"
        let stream = try open(Self.body([title]))
        let first = try #require(try stream.next())
        shutdown(stream.connection.fd, Int32(SHUT_RDWR))
        _ = try live.request("PATCH", "/books/\(book)", body: #"{"title":"Missed","author":"Herbert"}"#)

        let moved = try open(Self.body([title, author], lastEventId: first.id, resume: [title]))
        let frame = try #require(try moved.next())
        let events = Dictionary(
            uniqueKeysWithValues: frame.entries.map { ($0["watch"] as? String ?? "", $0["event"] as? String ?? "") })
        #expect(events == [title: "change", author: "snapshot"], "\(frame.data)")
        #expect(moved.drain(quiet: 200).isEmpty, "nothing repeated")

        // Without `resume`, every watch resumes: nothing to send until something changes.
        let quiet = try open(Self.body([title, author], lastEventId: frame.id))
        #expect(quiet.head.status == 200)
        #expect(quiet.drain(quiet: 200).isEmpty)
    }

    @Test func `bodies that are not a watch request are refused before the stream starts`() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library, title: "Dune")
        func refusal(_ body: String, contentType: String = "application/json") throws -> (Int, String) {
            let response = try live.request("POST", "/events", headers: ["Content-Type": contentType], body: body)
            return (response.status, response.json["detail"] as? String ?? "")
        }
        var (status, detail) = try refusal("{")
        #expect(status == 400)
        (status, detail) = try refusal("[]")
        #expect(status == 422)
        (status, detail) = try refusal(#"{"watches":[]}"#)
        #expect(status == 422 && detail.contains("watches"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":[1]}"#)
        #expect(status == 422)
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)"],"lastEventId":"x"}"#)
        #expect(status == 422 && detail.contains("lastEventId"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)"],"resume":["/books/\#(book)"]}"#)
        #expect(status == 422 && detail.contains("lastEventId"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)"],"lastEventId":"1","resume":["/libraries"]}"#)
        #expect(status == 422 && detail.contains("not one of the watches"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)"],"extra":true}"#)
        #expect(status == 422 && detail.contains("extra"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/bookz"]}"#)
        #expect(status == 400 && detail.contains("watch \"/bookz\""), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)","/books/\#(book)"]}"#)
        #expect(status == 400 && detail.contains("more than once"), "\(detail)")
        (status, detail) = try refusal(#"{"watches":["/books/00000000-0000-4000-8000-000000000001"]}"#)
        #expect(status == 404)
        (status, detail) = try refusal(#"{"watches":["/books/\#(book)"]}"#, contentType: "text/plain")
        #expect(status == 415)
        let many = (0...10_000).map { "\"/books?author=\($0)\"" }.joined(separator: ",")
        (status, detail) = try refusal(#"{"watches":[\#(many)]}"#)
        #expect(status == 400 && detail.contains("10000"), "\(detail)")
        #expect(live.subscribers == 0)
    }

    @Test func `a stream needs only the read token and a write token grants it too`() throws {
        let live = try LiveServer(token: "write-token-123", readToken: "read-token-1234")
        let created = try live.request(
            "POST", "/libraries", headers: ["Authorization": "Bearer write-token-123"], body: #"{"name":"Locked"}"#)
        let library = try #require(created.json["id"] as? String)
        let body = Self.body(["/libraries/\(library)?fields=name"])
        let anonymous = try EventStreamClient(port: live.port, path: "/events", body: body)
        #expect(anonymous.head.status == 401)
        for token in ["read-token-1234", "write-token-123"] {
            let stream = try EventStreamClient(
                port: live.port, path: "/events", headers: ["Authorization": "Bearer \(token)"], body: body)
            #expect(stream.head.status == 200)
        }
    }
}

/// `POST /events/{streamId}`: the watches of an open stream, changed without a new connection.
@Suite struct StreamSideChannelTests {
    let live = try! LiveServer()

    func change(_ streamID: String, _ body: String) throws -> TestResponse {
        try live.request("POST", "/events/\(streamID)", body: body)
    }

    @Test func `watches added get their snapshot in the stream and removed ones get nothing more`() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library, title: "Dune")
        let stream = try EventStreamClient(
            port: live.port, path: "/events", body: PostedWatchStreamTests.body(["/libraries/\(library)?fields=name"]))
        let streamID = try #require(stream.head.header("stream-id"))
        let first = try #require(try stream.next())

        let missing = "00000000-0000-4000-8000-000000000001"
        let title = "/books/\(book)?fields=title"
        #expect(try change(streamID, #"{"add":["\#(title)","/books/\#(missing)?fields=title"]}"#).status == 204)
        let added = try #require(try stream.next())
        let events = Dictionary(
            uniqueKeysWithValues: added.entries.map { ($0["watch"] as? String ?? "", $0["event"] as? String ?? "") })
        #expect(events == [title: "snapshot", "/books/\(missing)?fields=title": "delete"], "\(added.data)")
        #expect(Int(added.id ?? "")! >= Int(first.id ?? "")!, "ids never go back")

        _ = try live.request("PATCH", "/books/\(book)", body: #"{"title":"Dune Messiah"}"#)
        let changed = try #require(try stream.next())
        #expect(changed.entries.map { $0["watch"] as? String } == [title])

        #expect(try change(streamID, #"{"remove":["\#(title)"]}"#).status == 204)
        _ = try live.request("PATCH", "/books/\(book)", body: #"{"title":"Children of Dune"}"#)
        _ = try live.request("PATCH", "/libraries/\(library)", body: #"{"name":"After"}"#)
        let after = try #require(try stream.next())
        #expect(after.entries.map { $0["watch"] as? String } == ["/libraries/\(library)?fields=name"], "\(after.data)")
        #expect(live.subscribers == 1)
    }

    @Test func `a change names an open stream of this server and a well-formed body`() throws {
        let library = try live.createLibrary()
        let stream = try EventStreamClient(
            port: live.port, path: "/events", body: PostedWatchStreamTests.body(["/libraries/\(library)"]))
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try stream.next()
        #expect(try change("00000000-0000-4000-8000-000000000009", #"{"add":["/libraries"]}"#).status == 404)
        #expect(try change("not-a-uuid", #"{"add":["/libraries"]}"#).status == 400)
        // Nothing to add or remove: the call only brings the credential (a token's refresh).
        #expect(try change(streamID, #"{}"#).status == 204)
        #expect(try change(streamID, #"{"add":"/libraries"}"#).status == 422)
        #expect(try change(streamID, #"{"add":["/libraries","/libraries"]}"#).status == 422)
        #expect(try change(streamID, #"{"add":["/libraries"],"remove":["/libraries"]}"#).status == 422)
        #expect(try change(streamID, #"{"add":["/libraries"],"extra":1}"#).status == 422)
        #expect(try change(streamID, #"{"add":["/bookz"]}"#).status == 400)
        let many = (0..<10_000).map { "\"/books?author=\($0)\"" }.joined(separator: ",")
        let tooMany = try change(streamID, #"{"add":[\#(many)]}"#)
        #expect(tooMany.status == 400 && tooMany.text.contains("10000"), "\(tooMany.text)")
        let get = try live.request("GET", "/events/\(streamID)")
        #expect(get.status == 405 && get.header("allow") == "POST, OPTIONS")
        // A stream opened by GET has no id: its watches change by reconnecting (EventSource).
        let browser = try live.events("/events?watch=%2Flibraries")
        #expect(browser.head.header("stream-id") == nil)
        shutdown(stream.connection.fd, Int32(SHUT_RDWR))
        let deadline = Date().addingTimeInterval(5)
        var answer = 204
        while answer != 404, Date() < deadline {
            answer = try change(streamID, #"{"add":["/libraries?fields=name"]}"#).status
            usleep(20_000)
        }
        #expect(answer == 404, "a closed stream is forgotten")
    }
}
