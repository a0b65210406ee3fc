import Dispatch
import Foundation
import Glibc
import LibraryDomain
import SQLite
import Synchronization
import TestSupport
import Testing

/// Hardening IV: the side channel of a `POST /events` stream (`POST /events/{streamId}`) under
/// races and at size, and what one request can cost. Each case is one the adversarial round found.
@Suite struct SideChannelHardeningTests {
    let live = try! LiveServer()

    /// A side-channel call, given 30 s: a busy live side may take seconds to get to it on a debug
    /// build with the whole suite running.
    func change(_ streamID: String, _ body: String) throws -> TestResponse {
        try TestConnection(port: live.port, timeout: 30).request("POST", "/events/\(streamID)", body: body)
    }

    static func list(_ watches: [String]) -> String {
        "[" + watches.map { "\"" + $0 + "\"" }.joined(separator: ",") + "]"
    }

    /// The watches a run of frames carried entries for, with the last `title` each saw.
    static func titles(_ frames: [ReceivedEvent]) -> [String: String] {
        var seen: [String: String] = [:]
        for frame in frames {
            for entry in frame.entries {
                guard let watch = entry["watch"] as? String else { continue }
                if let title = (entry["data"] as? [String: Any])?["title"] as? String { seen[watch] = title }
            }
        }
        return seen
    }

    @Test func `a watch added and removed back to back while the live side is busy leaves the stream live`()
        throws
    {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library, title: "Dune")
        let title = "/books/\(book)?fields=title"
        for round in 0..<5 {
            let stream = try EventStreamClient(
                port: live.port, path: "/events", body: #"{"watches":["\#(title)"]}"#)
            let streamID = try #require(stream.head.header("stream-id"))
            _ = try #require(try stream.next(timeout: 30_000))
            // Another client keeps the live side busy: 2,000 watches, each a snapshot to read.
            let busy = (0..<1_000).map { "/books?author=busy\(round)-\($0)&fields=title" }
            let crowd = try live.connect()
            let crowdBody = #"{"watches":\#(Self.list(busy))}"#
            try crowd.send(
                "POST /events HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(crowdBody.utf8.count)\r\n\r\n" + crowdBody)
            let nobody = "/books?author=nobody\(round)&fields=title"
            let statuses = Mutex<[Int]>([])
            let port = live.port
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let body = index == 0 ? #"{"add":["\#(nobody)"]}"# : #"{"remove":["\#(nobody)"]}"#
                let connection = try? TestConnection(port: port, timeout: 30)
                let status = (try? connection?.request("POST", "/events/\(streamID)", body: body).status) ?? 0
                statuses.withLock { $0.append(status) }
            }
            #expect(statuses.withLock { $0 } == [204, 204], "round \(round)")
            _ = try TestConnection(port: live.port, timeout: 30).request(
                "PATCH", "/books/\(book)", body: #"{"title":"Round \#(round)"}"#)
            var heard = false
            let deadline = Date().addingTimeInterval(30)
            while !heard, Date() < deadline, let frame = try stream.next(timeout: 30_000) {
                heard = Self.titles([frame])[title] == "Round \(round)"
            }
            #expect(heard, "round \(round): the PATCH reached the stream")
            // Whichever call came first, the watch removed and added again is a watch like any
            // other: it gets a snapshot of its own.
            #expect(try change(streamID, #"{"remove":["\#(nobody)"]}"#).status == 204)
            #expect(try change(streamID, #"{"add":["\#(nobody)"]}"#).status == 204)
            var snapshot = false
            while !snapshot, let frame = try stream.next(timeout: 30_000) {
                snapshot = frame.entries.contains {
                    $0["watch"] as? String == nobody && $0["event"] as? String == "snapshot"
                }
            }
            #expect(snapshot, "round \(round): the watch added again got its snapshot")
            shutdown(crowd.fd, Int32(SHUT_RDWR))
            shutdown(stream.connection.fd, Int32(SHUT_RDWR))
        }
    }

    @Test func `a collection watch removed and added again while its snapshot is written hears every change after`()
        throws
    {
        let library = try live.createLibrary()
        let members = try LiveScaleTests.fill(live, library: library, count: 30_000)
        let anchor = try live.createBook(in: try live.createLibrary("Elsewhere"), title: "Anchor")
        let stream = try EventStreamClient(
            port: live.port, path: "/events", body: #"{"watches":["/books/\#(anchor)?fields=title"]}"#)
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try #require(try stream.next())
        let collection = "/books?libraryId=\(library)&fields=title"
        #expect(try change(streamID, #"{"add":["\#(collection)"]}"#).status == 204)
        #expect(try change(streamID, #"{"remove":["\#(collection)"]}"#).status == 204)
        #expect(try change(streamID, #"{"add":["\#(collection)"]}"#).status == 204)
        // Whatever arrives first, the last word of the watch is a snapshot of 30,000 members.
        var items = 0
        let deadline = Date().addingTimeInterval(60)
        while items < 30_000, Date() < deadline, let frame = try stream.next(timeout: 60_000) {
            for entry in frame.entries where entry["watch"] as? String == collection {
                items = ((entry["data"] as? [String: Any])?["items"] as? [Any])?.count ?? items
            }
        }
        #expect(items == 30_000)
        _ = try live.request("PATCH", "/books/\(members[17])", body: #"{"title":"Heard"}"#)
        // The second snapshot may still be on its way; then the change comes.
        var heard = false
        let changeDeadline = Date().addingTimeInterval(60)
        while !heard, Date() < changeDeadline, let frame = try stream.next(timeout: 60_000) {
            heard = frame.entries.contains { entry in
                entry["watch"] as? String == collection && entry["event"] as? String == "change"
                    && "\(entry["data"] ?? "")".contains("Heard")
            }
        }
        #expect(heard, "the watch added again hears the change")
    }

    @Test func `add and remove in random order leave exactly the watches the answers say, each hearing every change`()
        throws
    {
        let library = try live.createLibrary()
        let books = try (0..<6).map { try live.createBook(in: library, title: "B\($0)") }
        let watches = books.flatMap { ["/books/\($0)?fields=title", "/books/\($0)?fields=title,author"] }
        let stream = try EventStreamClient(
            port: live.port, path: "/events", body: #"{"watches":["/libraries/\#(library)?fields=name"]}"#)
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try #require(try stream.next())
        var random = SeededGenerator(state: 44)
        var held: Set<String> = []
        for step in 0..<40 {
            var add: [String] = []
            var remove: [String] = []
            for watch in watches where Int.random(in: 0..<4, using: &random) == 0 {
                if held.contains(watch) { remove.append(watch) } else { add.append(watch) }
            }
            guard !add.isEmpty || !remove.isEmpty else { continue }
            // Sometimes as one call, sometimes as two back to back, in either order.
            let adding = add.isEmpty ? nil : #""add":\#(Self.list(add))"#
            let removing = remove.isEmpty ? nil : #""remove":\#(Self.list(remove))"#
            let calls: [[String?]]
            switch Int.random(in: 0..<3, using: &random) {
            case 0: calls = [[adding, removing]]
            case 1: calls = [[adding], [removing]]
            default: calls = [[removing], [adding]]
            }
            for members in calls.map({ $0.compactMap { $0 } }) where !members.isEmpty {
                let body = "{" + members.joined(separator: ",") + "}"
                #expect(try change(streamID, body).status == 204, "step \(step): \(body)")
            }
            held.subtract(remove)
            held.formUnion(add)
            for (index, book) in books.enumerated() {
                _ = try live.request("PATCH", "/books/\(book)", body: #"{"title":"S\#(step)-\#(index)"}"#)
            }
            // What this step's PATCHes made, by watch: frames until every held watch is at its
            // book's new title (a busy machine may take seconds), then any that follow at once.
            // Entries from earlier steps arriving late are not this step's, and are passed over.
            func expected(_ watch: String) -> String {
                "S\(step)-\(books.firstIndex { watch.contains($0) }!)"
            }
            var heard: [String: String] = [:]
            func take(_ frames: [ReceivedEvent]) {
                for (watch, title) in Self.titles(frames) where title.hasPrefix("S\(step)-") { heard[watch] = title }
            }
            let deadline = Date().addingTimeInterval(30)
            while !held.allSatisfy({ heard[$0] == expected($0) }), Date() < deadline,
                let frame = try stream.next(timeout: 30_000)
            {
                take([frame])
            }
            take(stream.drain(quiet: 300))
            #expect(Set(heard.keys) == held, "step \(step): entries for exactly the held watches")
            for watch in held {
                #expect(heard[watch] == expected(watch), "step \(step): \(watch) is at the last change")
            }
        }
        #expect(live.subscribers(settlingAt: held.count + 1, within: 10) == held.count + 1)
    }

    @Test func `one target spelled many ways is one watch, and a watch takes only its own parameters`() throws {
        let library = try live.createLibrary()
        func refusal(_ body: String) throws -> (Int, String) {
            let response = try live.request("POST", "/events", body: body)
            return (response.status, response.json["detail"] as? String ?? "")
        }
        // The adversarial request: 10,000 watches of one library, made distinct by a parameter
        // that means nothing. Refused before anything is read.
        let spelled = (0..<10_000).map { "/libraries/\(library)?fields=name,books.title&n=\($0)" }
        var (status, detail) = try refusal(#"{"watches":\#(Self.list(spelled))}"#)
        #expect(status == 400 && detail.contains("\"n\" is not a parameter of a watch"), "\(detail)")
        let reordered = [
            "/libraries/\(library)?fields=name,books.title", "/libraries/\(library)?fields=books.title,name",
        ]
        (status, detail) = try refusal(#"{"watches":\#(Self.list(reordered))}"#)
        #expect(status == 400 && detail.contains("names what"), "\(detail)")
        // Watches of one library that differ in their fields are each a snapshot of the whole
        // membership: a stream carries a few, not thousands.
        let shapes = ["name", "address", "bookCount", "version", "createdAt", "updatedAt", "id", "name,address"]
        let nine = (shapes + ["name,bookCount"]).map { "/libraries/\(library)?fields=\($0),books.title" }
        (status, detail) = try refusal(#"{"watches":\#(Self.list(nine))}"#)
        #expect(
            status == 400 && detail.contains("one watch too many") && detail.contains("name,bookCount"), "\(detail)")
        let long = "/libraries/\(library)?fields=" + Array(repeating: "name", count: 600).joined(separator: ",")
        (status, detail) = try refusal(#"{"watches":["\#(long)"]}"#)
        #expect(status == 400 && detail.contains("2048 bytes"), "\(detail)")
        #expect(live.subscribers == 0)
        let eight = try EventStreamClient(
            port: live.port, path: "/events", body: #"{"watches":\#(Self.list(Array(nine.prefix(8))))}"#)
        #expect(eight.head.status == 200)
        #expect(try #require(try eight.next(timeout: 30_000)).entries.count == 8)
        shutdown(eight.connection.fd, Int32(SHUT_RDWR))
        #expect(live.subscribers(settlingAt: 0, within: 10) == 0)

        // The same on the side channel: against the watches held and within the call.
        let stream = try EventStreamClient(
            port: live.port, path: "/events", body: #"{"watches":["\#(reordered[0])"]}"#)
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try #require(try stream.next())
        var answer = try change(streamID, #"{"add":["\#(reordered[1])"]}"#)
        #expect(answer.status == 400 && answer.text.contains("names what"), "\(answer.text)")
        answer = try change(streamID, #"{"add":["/books?libraryId=\#(library)&offset=10"]}"#)
        #expect(answer.status == 400 && answer.text.contains("\\\"offset\\\""), "\(answer.text)")
        // Eight more of the library, each its own fields: nine in all.
        let more = (shapes.dropFirst() + ["name,bookCount"]).map { "/libraries/\(library)?fields=books.title,\($0)" }
        answer = try change(streamID, #"{"add":\#(Self.list(more))}"#)
        #expect(answer.status == 400 && answer.text.contains("one watch too many"), "\(answer.text)")
        // Removing the one spelling and adding the other in one call is a change of spelling.
        answer = try change(streamID, #"{"add":["\#(reordered[1])"],"remove":["\#(reordered[0])"]}"#)
        #expect(answer.status == 204, "\(answer.text)")
        #expect(live.subscribers(settlingAt: 1, within: 10) == 1)
    }

    @Test func `removing thousands of watches in one call leaves the stream and its other watches live`() throws {
        let library = try live.createLibrary()
        let book = try live.createBook(in: library, title: "Kept")
        let kept = "/books/\(book)?fields=title"
        let stream = try EventStreamClient(port: live.port, path: "/events", body: #"{"watches":["\#(kept)"]}"#)
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try #require(try stream.next())
        // Collection watches: a stream reads their snapshots one after another, so they take a
        // while to be all subscribed (on PostgreSQL behind a pooler, about 2,000 a second).
        let many = (0..<3_000).map { "/books?author=a\($0)&fields=title" }
        #expect(try change(streamID, #"{"add":\#(Self.list(many))}"#).status == 204)
        #expect(live.subscribers(settlingAt: 3_001, within: 60) == 3_001)
        #expect(try change(streamID, #"{"remove":\#(Self.list(many))}"#).status == 204)
        #expect(live.subscribers(settlingAt: 1, within: 10) == 1)
        _ = stream.drain(quiet: 300)
        _ = try live.request("PATCH", "/books/\(book)", body: #"{"title":"Still heard"}"#)
        let heard = Self.titles(try stream.drain(atLeast: 1))
        #expect(heard == [kept: "Still heard"])
    }
}

/// `/healthz` apart from the data's queues.
@Suite struct HealthUnderLoadTests {
    @Test func `a health check does not wait for a probe stuck behind the database when a recent answer exists`()
        throws
    {
        try withTemporaryFile { path in
            let live = try LiveServer(path: path, busyTimeoutMilliseconds: 10_000)
            #expect(try live.request("GET", "/healthz").status == 200)  // the first answer
            let blocker = try Connection(path: path)
            try blocker.execute("BEGIN IMMEDIATE")  // the next probe waits for the write lock
            let check = try live.request("GET", "/healthz")
            #expect(check.status == 200, "answered from the last probe while the new one waits")
            let metrics = try live.request("GET", "/metrics").text
            #expect(metrics.contains("library_health_probes_total 2\n"), "the probe under way started")
            try blocker.execute("ROLLBACK")
        }
    }
}

/// The smaller findings of the same round.
@Suite struct HardeningIVSmallerFindingsTests {
    @Test func `the side channel takes the read token in Authorization only, not in the query`() throws {
        let live = try LiveServer(readToken: "reader-secret")
        let library = try live.createLibrary()
        let stream = try EventStreamClient(
            port: live.port, path: "/events?access_token=reader-secret",
            body: #"{"watches":["/libraries/\#(library)?fields=name"]}"#)
        #expect(stream.head.status == 200, "the stream itself takes it")
        let streamID = try #require(stream.head.header("stream-id"))
        let body = #"{"add":["/libraries?fields=name"]}"#
        let inQuery = try live.request("POST", "/events/\(streamID)?access_token=reader-secret", body: body)
        #expect(inQuery.status == 401)
        let inHeader = try live.request(
            "POST", "/events/\(streamID)", headers: ["Authorization": "Bearer reader-secret"], body: body)
        #expect(inHeader.status == 204)
    }

    @Test func `a cross-origin page can read Stream-Id, and no answer may be sniffed`() throws {
        let live = try LiveServer(cors: "https://app.example")
        let library = try live.createLibrary()
        let stream = try EventStreamClient(
            port: live.port, path: "/events", headers: ["Origin": "https://app.example"],
            body: #"{"watches":["/libraries/\#(library)?fields=name"]}"#)
        #expect(stream.head.header("access-control-expose-headers")?.contains("Stream-Id") == true)
        for path in ["/libraries", "/libraries/\(library)", "/books/nope", "/healthz"] {
            #expect(try live.request("GET", path).header("x-content-type-options") == "nosniff", "\(path)")
        }
    }

    @Test func `an idempotency key names the query too, and expires at 24 hours even before it is pruned`() throws {
        try withTemporaryFile { path in
            let live = try LiveServer(path: path)
            let library = try live.createLibrary()
            let body = #"{"title":"Dune"}"#
            let first = try live.request(
                "POST", "/libraries/\(library)/books?x=1", headers: ["Idempotency-Key": "q"], body: body)
            #expect(first.status == 201)
            let otherQuery = try live.request(
                "POST", "/libraries/\(library)/books?x=2", headers: ["Idempotency-Key": "q"], body: body)
            #expect(otherQuery.status == 422, "another query is another request")
            let again = try live.request(
                "POST", "/libraries/\(library)/books?x=1", headers: ["Idempotency-Key": "q"], body: body)
            #expect(again.status == 201 && again.body == first.body)
            // 25 hours later, not yet pruned: the key is free, and the same request creates again.
            try Connection(path: path).execute("UPDATE idempotency_keys SET created_at = created_at - 90000")
            let later = try live.request(
                "POST", "/libraries/\(library)/books?x=1", headers: ["Idempotency-Key": "q"], body: body)
            #expect(later.status == 201 && later.json["id"] as? String != first.json["id"] as? String)
            let retried = try live.request(
                "POST", "/libraries/\(library)/books?x=1", headers: ["Idempotency-Key": "q"], body: body)
            #expect(retried.body == later.body, "the new answer is kept under the key")
        }
    }
}

/// A collection's history, replayed once for all the field sets its resuming watches ask for.
@Suite struct SharedReplayTests {
    @Test func `watches of one collection with different fields each resume with their own fields only`() throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        let books = try (0..<6).map { try live.createBook(in: library, title: "T\($0)") }
        let byTitle = "/books?libraryId=\(library)&fields=title"
        let byAuthor = "/books?libraryId=\(library)&fields=author"
        let both = "/books?libraryId=\(library)&fields=title,author"
        let watches = SideChannelHardeningTests.list([byTitle, byAuthor, both])
        let stream = try EventStreamClient(port: live.port, path: "/events", body: #"{"watches":\#(watches)}"#)
        let first = try #require(try stream.next())
        shutdown(stream.connection.fd, Int32(SHUT_RDWR))
        // Titles of books 0-1, authors of 2-3, both of 4, a book that comes and goes, one that leaves.
        for (index, book) in books.enumerated() {
            let body: String
            switch index {
            case 0, 1: body = #"{"title":"New \#(index)"}"#
            case 2, 3: body = #"{"author":"Author \#(index)"}"#
            case 4: body = #"{"title":"New 4","author":"Author 4"}"#
            default: body = #"{"isbn":"9780441013593"}"#
            }
            #expect(try live.request("PATCH", "/books/\(book)", body: body).status == 200)
        }
        let passing = try live.createBook(in: library, title: "Passing")
        #expect(try live.request("DELETE", "/books/\(passing)").status == 204)
        let other = try live.createLibrary("Other")
        #expect(try live.request("PATCH", "/books/\(books[5])", body: #"{"libraryId":"\#(other)"}"#).status == 200)

        let resumed = try EventStreamClient(
            port: live.port, path: "/events", body: #"{"watches":\#(watches),"lastEventId":"\#(first.id ?? "")"}"#)
        let frame = try #require(try resumed.next(timeout: 30_000))
        var changes: [String: [String: Any]] = [:]
        for entry in frame.entries {
            changes[entry["watch"] as? String ?? ""] = entry["data"] as? [String: Any]
        }
        func changed(_ watch: String) -> [String: [String: String]] {
            var members: [String: [String: String]] = [:]
            for member in changes[watch]?["changed"] as? [[String: Any]] ?? [] {
                let id = member["id"] as? String ?? ""
                members[id] = member.filter { $0.key != "id" }.mapValues { "\($0)" }
            }
            return members
        }
        #expect(
            changed(byTitle) == [
                books[0]: ["title": "New 0"], books[1]: ["title": "New 1"], books[4]: ["title": "New 4"],
            ], "\(frame.data)")
        #expect(
            changed(byAuthor) == [
                books[2]: ["author": "Author 2"], books[3]: ["author": "Author 3"], books[4]: ["author": "Author 4"],
            ], "\(frame.data)")
        #expect(changed(both).count == 5, "\(frame.data)")
        for watch in [byTitle, byAuthor, both] {
            let change = changes[watch] ?? [:]
            let removed = change["removed"] as? [String] ?? []
            let added = change["added"] as? [Any] ?? []
            #expect(removed == [books[5]], "\(watch): \(frame.data)")
            #expect(added.isEmpty, "\(watch): the book that came and went")
        }
    }
}
