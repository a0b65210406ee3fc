import Foundation
import Glibc
import TestSupport
import Testing

/// Collection streams (`/libraries/events`, `/books/events`) over real sockets: a snapshot equal
/// to the list, then `added` / `removed` / `changed` decided from each write.
@Suite struct LiveQueryTests {
    let live = try! LiveServer()

    func write(_ method: String, _ path: String, _ body: String? = nil) throws {
        let response = try live.request(method, path, body: body)
        #expect((200...204).contains(response.status), "\(method) \(path): \(response.text)")
    }

    /// The ids `GET path` lists (one page of up to 500).
    func listed(_ path: String) throws -> [String] {
        let response = try live.request("GET", path + (path.contains("?") ? "&" : "?") + "limit=500")
        return (response.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    static func ids(_ items: Any?) -> [String] {
        (items as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test func booksStream_SnapshotEqualsTheListThenEnteringAndLeavingByEachKindOfWrite() throws {
        let library = try live.createLibrary("A")
        let other = try live.createLibrary("B")
        let herbert = #","author":"Herbert""#
        let first = try live.createBook(in: library, title: "Dune", extra: herbert)
        _ = try live.createBook(in: library, title: "Emma", extra: #","author":"Austen""#)
        let lent = try live.createBook(in: library, title: "Lent", extra: herbert + #","available":false"#)
        let filter = "libraryId=\(library)&author=Herbert&available=true"
        let stream = try live.events("/books/events?\(filter)&fields=title")
        #expect(stream.head.status == 200)
        let snapshot = try #require(try stream.next())
        #expect(snapshot.event == "snapshot")
        #expect(Self.ids(snapshot.json["items"]) == (try listed("/books?\(filter)")))
        #expect(Self.ids(snapshot.json["items"]) == [first])
        #expect(Set((snapshot.json["items"] as? [[String: Any]])?.first?.keys.map { $0 } ?? []) == ["id", "title"])

        func expectChange(_ part: String, _ id: String, keys: Set<String>? = nil) throws {
            let event = try #require(try stream.next())
            #expect(event.event == "change")
            #expect(Set(event.json.keys) == [part], "\(event.data)")
            if part == "removed" {
                #expect(event.json["removed"] as? [String] == [id])
            } else {
                let items = event.json[part] as? [[String: Any]] ?? []
                #expect(items.map { $0["id"] as? String } == [id], "\(event.data)")
                if let keys { #expect(Set(items.first?.keys.map { $0 } ?? []) == keys, "\(event.data)") }
            }
        }
        // Created matching: added with the requested fields; created not matching: nothing.
        _ = try live.createBook(in: library, title: "Other", extra: #","author":"Tolkien""#)
        let created = try live.createBook(in: library, title: "Messiah", extra: herbert)
        try expectChange("added", created, keys: ["id", "title"])
        // Availability flips out and back in.
        try write("PATCH", "/books/\(created)", #"{"available":false}"#)
        try expectChange("removed", created)
        try write("PATCH", "/books/\(lent)", #"{"available":true}"#)
        try expectChange("added", lent, keys: ["id", "title"])
        // A change of a requested field; one of a field nobody asked for sends nothing.
        try write("PATCH", "/books/\(first)", #"{"isbn":"0-306-40615-2"}"#)
        try write("PATCH", "/books/\(first)", #"{"title":"Dune (1965)"}"#)
        try expectChange("changed", first, keys: ["id", "title"])
        // The author changes away and back.
        try write("PATCH", "/books/\(first)", #"{"author":"F. Herbert"}"#)
        try expectChange("removed", first)
        try write("PATCH", "/books/\(first)", #"{"author":"Herbert","title":"Dune"}"#)
        try expectChange("added", first, keys: ["id", "title"])
        // Moved out of the filtered library and back in.
        try write("PATCH", "/books/\(lent)", #"{"libraryId":"\#(other)"}"#)
        try expectChange("removed", lent)
        try write("PATCH", "/books/\(lent)", #"{"libraryId":"\#(library)"}"#)
        try expectChange("added", lent)
        // Deleted.
        try write("DELETE", "/books/\(lent)")
        try expectChange("removed", lent)
        #expect(stream.drain().isEmpty, "nothing else was sent")
    }

    @Test func booksStream_DeletingTheFilteredLibraryRemovesItsBooksAndTheStreamGoesOn() throws {
        let library = try live.createLibrary("A")
        let books = try (0..<3).map { try live.createBook(in: library, title: "B\($0)") }
        let stream = try live.events("/books/events?libraryId=\(library)&fields=title")
        #expect(Self.ids(try stream.next()?.json["items"]) == books)
        try write("DELETE", "/libraries/\(library)")
        let removed = try #require(try stream.next())
        #expect(Set(removed.json["removed"] as? [String] ?? []) == Set(books))
        // Every book stream: the whole collection, with no filter.
        let all = try live.events("/books/events?fields=author")
        #expect(Self.ids(try all.next()?.json["items"]) == (try listed("/books")))
        let fresh = try live.createBook(in: try live.createLibrary(), title: "New")
        let added = try #require(try all.next())
        #expect(Self.ids(added.json["added"]) == [fresh])
        #expect(Set((added.json["added"] as? [[String: Any]])?.first?.keys.map { $0 } ?? []) == ["id", "author"])
        #expect(stream.drain(quiet: 200).isEmpty, "the emptied library's stream did not end and sent nothing more")
        #expect(!stream.ended)
    }

    @Test func librariesStream_ReportsCreationChangesAndDeletion() throws {
        let existing = try live.createLibrary("Old")
        let stream = try live.events("/libraries/events?fields=name,bookCount")
        let snapshot = try #require(try stream.next())
        #expect(Self.ids(snapshot.json["items"]) == [existing])
        #expect(
            Set((snapshot.json["items"] as? [[String: Any]])?.first?.keys.map { $0 } ?? []) == [
                "id", "name", "bookCount",
            ])

        let created = try live.createLibrary("New")
        let added = try #require(try stream.next())
        #expect(Self.ids(added.json["added"]) == [created])
        #expect((added.json["added"] as? [[String: Any]])?.first?["name"] as? String == "New")
        try write("PATCH", "/libraries/\(created)", #"{"address":"1 Main St"}"#)  // not requested
        _ = try live.createBook(in: created)
        let changed = try #require(try stream.next())
        let item = (changed.json["changed"] as? [[String: Any]])?.first
        #expect(item?["id"] as? String == created)
        #expect(item?["bookCount"] as? Int == 1)
        #expect(Set(item?.keys.map { $0 } ?? []) == ["id", "bookCount"], "only the requested field that changed")
        try write("DELETE", "/libraries/\(existing)")
        #expect(try stream.next()?.json["removed"] as? [String] == [existing])
    }

    @Test func collectionStreams_RejectBadFieldsAndFiltersBeforeStreaming() throws {
        #expect(try live.events("/books/events?fields=nope").head.status == 400)
        #expect(try live.events("/books/events?available=maybe").head.status == 400)
        #expect(try live.events("/books/events?libraryId=12").head.status == 400)
        #expect(try live.events("/libraries/events?fields=title").head.status == 400)
        #expect(try live.events("/libraries/events", headers: ["Last-Event-ID": "x"]).head.status == 400)
        #expect(try live.request("POST", "/books/events", body: "{}").status == 405)
    }

    @Test func collectionStream_ResumesWithWhatItMissedAndNoSnapshot() throws {
        let library = try live.createLibrary()
        let kept = try live.createBook(in: library, title: "Kept", extra: #","author":"X""#)
        let stream = try live.events("/books/events?author=X&fields=title")
        let snapshot = try #require(try stream.next())
        #expect(Self.ids(snapshot.json["items"]) == [kept])
        let joined = try live.createBook(in: library, title: "Joined", extra: #","author":"Y""#)
        try write("PATCH", "/books/\(joined)", #"{"author":"X"}"#)  // enters, after the id
        try write("PATCH", "/books/\(kept)", #"{"title":"Renamed"}"#)
        try write("PATCH", "/books/\(kept)", #"{"available":false}"#)  // not requested, not filtered
        let resumed = try live.events("/books/events?author=X&fields=title", headers: ["Last-Event-ID": snapshot.id!])
        // What was missed comes folded into one change (a replay can span the whole history).
        let missed = try #require(try resumed.next())
        #expect(missed.event == "change", "\(missed.data)")
        #expect(Self.ids(missed.json["added"]) == [joined])
        #expect((missed.json["changed"] as? [[String: Any]])?.first?["title"] as? String == "Renamed")
        #expect(Int(missed.id!)! > Int(snapshot.id!)!)
        #expect(resumed.drain(quiet: 300).isEmpty)
        // The original stream got the same changes live, one by one, to the same state.
        let live = CollectionModel(list: "/books?author=X", fields: ["title"])
        live.apply(snapshot)
        stream.drain(quiet: 300).forEach(live.apply)
        try live.check(self.live)
        let resumedModel = CollectionModel(list: "/books?author=X", fields: ["title"])
        resumedModel.apply(snapshot)
        resumedModel.apply(missed)
        try resumedModel.check(self.live)
    }

    @Test func resumedWatchOfAResourceGoneBeyondTheHistory_GetsItsDelete() throws {
        let live = try LiveServer(history: 10)
        defer { live.stop() }
        let library = try live.createLibrary()
        let book = try live.createBook(in: library)
        let watch = "/books/\(book)?fields=title"
        let stream = try live.events(WatchStreamTests.query([watch]))
        let first = try #require(try stream.next())
        shutdown(stream.connection.fd, Int32(SHUT_RDWR))
        #expect(try live.request("DELETE", "/books/\(book)").status == 204)
        for index in 0..<140 { _ = try live.createBook(in: library, title: "filler \(index)") }  // prunes the log
        let resumed = try live.events(WatchStreamTests.query([watch], lastEventID: first.id))
        #expect(resumed.head.status == 200)
        let frame = try #require(try resumed.next())
        #expect(frame.entries.map { $0["event"] as? String } == ["delete"])
        #expect((frame.entries.first?["data"] as? [String: Any])?["id"] as? String == book)
        // A single stream resuming there is a 404, as before.
        let single = try live.events(
            "/books/\(book)/events", headers: ["Last-Event-ID": String(WatchStreamTests.seq(first))])
        #expect(single.head.status == 404)
    }
}

/// Readers of collection and multiplexed streams that stall: their changes fold, and what they
/// finally read still rebuilds the list.
@Suite struct LiveQuerySlowReaderTests {
    let live = try! LiveServer()

    @Test(arguments: ["collection", "watches"])
    func stalledReader_FoldsAndStillEndsAtTheListsState(kind: String) throws {
        let library = try live.createLibrary()
        var books = try (0..<10).map { try live.createBook(in: library, title: "B\($0)") }
        let watch = "/books?libraryId=\(library)&fields=title"
        let model = CollectionModel(list: "/books?libraryId=\(library)", fields: ["title"])
        let stalled = try live.events(
            kind == "collection" ? "/books/events?libraryId=\(library)&fields=title" : WatchStreamTests.query([watch]))
        var size: Int32 = 4096
        setsockopt(stalled.connection.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        func apply(_ event: ReceivedEvent) {
            if kind == "collection" { model.apply(event) } else { LiveRandomizedTests.apply(event, to: [watch: model]) }
        }
        apply(try #require(try stalled.next()))
        let padding = String(repeating: "x", count: 450)
        for index in 0..<300 {
            if index % 40 == 39 {
                books.append(try live.createBook(in: library, title: "new \(index)"))
                #expect(try live.request("DELETE", "/books/\(books.removeFirst())").status == 204)
            }
            let patch = try live.request(
                "PATCH", "/books/\(books[index % books.count])", body: #"{"title":"\#(index) \#(padding)"}"#)
            #expect(patch.status == 200)
        }
        var received = 0
        while let event = try? stalled.next(timeout: 10_000) {
            received += 1
            apply(event)
            if model.items.values.contains(where: { $0["title"] as? String == "299 \(padding)" }) { break }
        }
        #expect(received < 300, "pending changes were folded")
        try model.check(live)
    }
}

/// A collection snapshot larger than a page, from a database file (its own reader connection).
@Suite struct PagedSnapshotTests {
    @Test func collectionSnapshot_SpansPagesInListOrderWhileWritesGoOn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("paged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let live = try LiveServer(path: directory.appendingPathComponent("db.sqlite").path)
        defer { live.stop() }
        let library = try live.createLibrary()
        var created: [String] = []
        for index in 0..<2_345 {
            created.append(try live.createBook(in: library, title: "B\(index)"))
        }
        let stream = try live.events("/books/events?libraryId=\(library)&fields=title")
        // Writes while the snapshot is read: those after its id come as changes, none is lost.
        let late = try live.createBook(in: library, title: "Late")
        let snapshot = try #require(try stream.next(timeout: 20_000))
        let items = LiveQueryTests.ids(snapshot.json["items"])
        #expect(items.count >= 2_345)
        #expect(Array(items.prefix(2_345)) == created, "list order, every page")
        if items.count == 2_345 {
            let added = try #require(try stream.next())
            #expect(LiveQueryTests.ids(added.json["added"]) == [late])
            #expect(Int(added.id!)! > Int(snapshot.id!)!)
        } else {
            #expect(items.last == late)
            #expect(stream.drain(quiet: 300).isEmpty, "a change the snapshot holds is not sent again")
        }
    }
}
