import Foundation
import Glibc
import TestSupport
import Testing

/// Windows of lists (`/books/events?sort=title&limit=3`): the subscriber's items stay the first
/// rows of `GET /books` with the same query after every write, on every engine.
@Suite struct LiveWindowTests {
    let live = try! LiveServer()

    func write(_ method: String, _ path: String, _ body: String? = nil) throws {
        let response = try live.request(method, path, body: body)
        #expect((200...204).contains(response.status), "\(method) \(path): \(response.text)")
    }

    var windowReads: Int { live.hub.counters.windowReads.load(ordering: .relaxed) }

    /// The window's next event, applied to `model`, as `added` ids, `removed` ids and `changed` items.
    func nextChange(_ stream: EventStreamClient, _ model: CollectionModel) throws -> (
        added: [String], removed: [String], changed: [[String: Any]]
    ) {
        let event = try #require(try stream.next())
        #expect(event.event == "change", "\(event.data)")
        model.apply(event)
        return (
            LiveQueryTests.ids(event.json["added"]), event.json["removed"] as? [String] ?? [],
            event.json["changed"] as? [[String: Any]] ?? []
        )
    }

    @Test func window_FollowsTheListThroughEachKindOfWrite_ReadingOnlyWhenAMemberLeavesAFullWindow() throws {
        let library = try live.createLibrary("A")
        let other = try live.createLibrary("B")
        var books: [String: String] = [:]
        for title in ["delta", "Alpha", "echo", "charlie", "bravo", "foxtrot"] {
            books[title] = try live.createBook(in: library, title: title, extra: #","author":"X""#)
        }
        let list = "/books?libraryId=\(library)&sort=title&limit=3"
        let stream = try live.events("/books/events?libraryId=\(library)&sort=title&limit=3&fields=author")
        #expect(stream.head.status == 200)
        let model = CollectionModel(list: list + "&fields=title,author", fields: ["title", "author"])
        let snapshot = try #require(try stream.next())
        #expect(snapshot.event == "snapshot")
        model.apply(snapshot)
        #expect(LiveQueryTests.ids(snapshot.json["items"]) == [books["Alpha"]!, books["bravo"]!, books["charlie"]!])
        try model.check(live)
        let opened = windowReads

        // A write after the window's last row: nothing sent, nothing read.
        try write("PATCH", "/books/\(books["echo"]!)", #"{"title":"golf"}"#)
        try write("PATCH", "/books/\(books["delta"]!)", #"{"author":"Y"}"#)
        #expect(stream.drain(quiet: 300).isEmpty)
        // A book renamed into the window: it enters, the last row leaves.
        try write("PATCH", "/books/\(books["foxtrot"]!)", #"{"title":"apple"}"#)
        var change = try nextChange(stream, model)
        #expect(change.added == [books["foxtrot"]!] && change.removed == [books["charlie"]!])
        // A member's requested field: changed, with it alone.
        try write("PATCH", "/books/\(books["bravo"]!)", #"{"author":"Z"}"#)
        change = try nextChange(stream, model)
        #expect(change.changed.count == 1 && Set(change.changed[0].keys) == ["id", "author"])
        // A member renamed within the window: changed, carrying the sort field.
        try write("PATCH", "/books/\(books["bravo"]!)", #"{"title":"aardvark"}"#)
        change = try nextChange(stream, model)
        #expect(change.changed.first?["title"] as? String == "aardvark" && change.added.isEmpty)
        #expect(windowReads == opened, "nothing was read so far")
        // A member renamed past the end: it leaves and the next row enters (one read).
        try write("PATCH", "/books/\(books["Alpha"]!)", #"{"title":"zulu"}"#)
        change = try nextChange(stream, model)
        #expect(change.removed == [books["Alpha"]!] && change.added == [books["charlie"]!])
        #expect(windowReads == opened + 1)
        // A member deleted, one moved to another library, one created before the rest.
        try write("DELETE", "/books/\(books["charlie"]!)")
        change = try nextChange(stream, model)
        #expect(change.removed == [books["charlie"]!] && change.added == [books["delta"]!])
        try write("PATCH", "/books/\(books["foxtrot"]!)", #"{"libraryId":"\#(other)"}"#)
        change = try nextChange(stream, model)
        #expect(change.removed == [books["foxtrot"]!] && change.added == [books["echo"]!])
        let first = try live.createBook(in: library, title: "aaa", extra: #","author":"X""#)
        change = try nextChange(stream, model)
        #expect(change.added == [first] && change.removed == [books["echo"]!])
        #expect(stream.drain(quiet: 300).isEmpty)
        #expect(windowReads == opened + 3)
        // The changes, applied, are the list.
        try model.check(live)
    }

    @Test func windows_OfEveryShape_MatchTheirListsAfterRandomWrites() throws {
        for seed in [1, 2, 3] as [UInt64] {
            try randomWrites(seed: seed)
        }
    }

    private func randomWrites(seed: UInt64) throws {
        var random = SeededGenerator(state: 0xD1B5_4A32_D192_ED03 &* seed)
        let libraries = try (0..<2).map { try live.createLibrary("L\($0)") }
        let words = ["Dune", "dune", "Emma", "Anna", "Zed", "éclair", "Ulysses", "an"]
        func title() -> String { "\(words.randomElement(using: &random)!) \(Int.random(in: 0..<4, using: &random))" }
        func year() -> String {
            Bool.random(using: &random) ? "null" : "\(Int.random(in: 1990...1995, using: &random))"
        }
        var books: [String] = []
        for _ in 0..<24 {
            let extra = #","author":"A\#(Int.random(in: 0..<3, using: &random))","publishedYear":\#(year())"#
            books.append(try live.createBook(in: libraries[0], title: title(), extra: extra))
        }
        // Windows of each kind: sorted either way by each field or in insertion order, filtered,
        // searched, and starting after a cursor.
        var windows: [(EventStreamClient, CollectionModel)] = []
        let sorts = ["title", "-title", "author", "-publishedYear", "publishedYear", "createdAt", "-updatedAt", nil]
        for (index, sort) in sorts.enumerated() {
            // The first window is of every library's books: a library's deletion takes several of
            // its rows in one change.
            var query =
                (index == 0 ? [] : ["libraryId=\(libraries[0])"]) + ["limit=\(Int.random(in: 1...6, using: &random))"]
            if let sort { query.append("sort=\(sort)") }
            if index % 3 == 1 { query.append("available=true") }
            if index % 4 == 2 { query.append("q=dun") }
            if index % 4 == 3 {
                let page = try live.request("GET", "/books?" + query.joined(separator: "&"))
                if let cursor = page.json["nextCursor"] as? String { query.append("cursor=\(cursor)") }
            }
            let fields = Set(
                ["title", "available"] + (sort.map { [$0.hasPrefix("-") ? String($0.dropFirst()) : $0] } ?? []))
            let stream = try live.events("/books/events?" + query.joined(separator: "&") + "&fields=title,available")
            #expect(stream.head.status == 200, "\(query)")
            let model = CollectionModel(
                list: "/books?" + query.joined(separator: "&") + "&fields=" + fields.sorted().joined(separator: ","),
                fields: fields)
            model.apply(try #require(try stream.next()))
            try model.check(live)
            windows.append((stream, model))
        }
        // Consecutive pages of one list, each a window (one list's windows are checked together).
        for sort in ["title", "-publishedYear", "updatedAt"] {
            let query = "libraryId=\(libraries[0])&sort=\(sort)&limit=3"
            var cursor: String?
            for _ in 0..<4 {
                let pageQuery = query + (cursor.map { "&cursor=\($0)" } ?? "")
                let listed = try live.request("GET", "/books?" + pageQuery)
                cursor = listed.json["nextCursor"] as? String
                let field = sort.hasPrefix("-") ? String(sort.dropFirst()) : sort
                let stream = try live.events("/books/events?" + pageQuery + "&fields=title")
                let model = CollectionModel(
                    list: "/books?" + pageQuery + "&fields=" + Set(["title", field]).sorted().joined(separator: ","),
                    fields: Set(["title", field]))
                model.apply(try #require(try stream.next()))
                windows.append((stream, model))
                if cursor == nil { break }
            }
        }
        for _ in 0..<60 {
            let book = books.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                books.append(
                    try live.createBook(in: libraries[0], title: title(), extra: #","publishedYear":\#(year())"#))
            case 1:
                try write("DELETE", "/books/\(book)")
                books.removeAll { $0 == book }
            case 2:
                try write("PATCH", "/books/\(book)", #"{"libraryId":"\#(libraries.randomElement(using: &random)!)"}"#)
            case 3: try write("PATCH", "/books/\(book)", #"{"available":\#(Bool.random(using: &random))}"#)
            case 4: try write("PATCH", "/books/\(book)", #"{"author":"A\#(Int.random(in: 0..<3, using: &random))"}"#)
            case 5: try write("PATCH", "/books/\(book)", #"{"publishedYear":\#(year())}"#)
            case 6: try write("PATCH", "/books/\(book)", #"{"isbn":"0-306-40615-2"}"#)
            case 7:
                // A library of a few books, then its deletion: one change that removes them all.
                let passing = try live.createLibrary("Passing")
                for _ in 0..<3 { _ = try live.createBook(in: passing, title: title()) }
                try write("DELETE", "/libraries/\(passing)")
            default: try write("PATCH", "/books/\(book)", #"{"title":"\#(title())"}"#)
            }
        }
        for (stream, model) in windows {
            var ids: [Int] = []
            let deadline = Date().addingTimeInterval(10)
            repeat {
                for event in stream.drain(quiet: 300) {
                    ids += Int(event.id ?? "").map { [$0] } ?? []
                    model.apply(event)
                }
            } while try !model.matches(live) && Date() < deadline
            #expect(ids == ids.sorted() && Set(ids).count == ids.count, "ids strictly increase")
            try model.check(live)
            #expect(!stream.ended)
        }
    }

    @Test func windowsInAMultiplexedStream_AndTheirRefusals() throws {
        let library = try live.createLibrary()
        let books = try ["c", "a", "b"].map { try live.createBook(in: library, title: $0) }
        let watch = "/books?libraryId=\(library)&sort=-title&limit=2&fields=title"
        let stream = try live.events(WatchStreamTests.query([watch]))
        #expect(stream.head.status == 200)
        let model = CollectionModel(
            list: "/books?libraryId=\(library)&sort=-title&limit=2&fields=title", fields: ["title"])
        LiveRandomizedTests.apply(try #require(try stream.next()), to: [watch: model])
        #expect(model.items.keys.sorted() == [books[0], books[2]].sorted())
        try write("PATCH", "/books/\(books[1])", #"{"title":"d"}"#)
        LiveRandomizedTests.apply(try #require(try stream.next()), to: [watch: model])
        try model.check(live)

        for bad in ["sort=nope", "limit=0", "limit=501", "q=ab", "sort=title&cursor=c12", "cursor=zz"] {
            let single = try live.events("/books/events?libraryId=\(library)&\(bad)")
            #expect(single.head.status == 400, "\(bad)")
            let multiplexed = try live.events(WatchStreamTests.query(["/books?libraryId=\(library)&\(bad)"]))
            #expect(multiplexed.head.status == 400, "\(bad)")
        }
        #expect(try live.events("/books/events?libraryId=\(library)&limit=2").head.status == 200)
    }

    /// Past the windows a server keeps, a new one is a 503 that says so; one already open is
    /// shared, and one closed makes room.
    @Test func windowsPastTheServersLimit_AreA503UntilOneCloses() throws {
        let live = try LiveServer(maxWindows: 2)
        defer { live.stop() }
        let library = try live.createLibrary()
        _ = try live.createBook(in: library, title: "a")
        let first = try live.events("/books/events?sort=title&limit=1")
        let second = try live.events("/books/events?sort=title&limit=2")
        let shared = try live.events("/books/events?sort=title&limit=2")
        for stream in [first, second, shared] {
            #expect(stream.head.status == 200)
            #expect(try stream.next()?.event == "snapshot")
        }
        let refused = try live.request("GET", "/books/events?sort=title&limit=3")
        #expect(refused.status == 503)
        #expect((refused.json["detail"] as? String)?.contains("2 windows of lists") == true, "\(refused.text)")
        #expect(refused.header("retry-after") == "1")
        let multiplexed = try live.events(WatchStreamTests.query(["/books?sort=-title&limit=3&fields=title"]))
        #expect(multiplexed.head.status == 503)
        shutdown(first.connection.fd, Int32(SHUT_RDWR))
        let deadline = Date().addingTimeInterval(5)
        while live.hub.counters.windows.load(ordering: .relaxed) > 1 && Date() < deadline { usleep(10_000) }
        let third = try live.events("/books/events?sort=title&limit=3")
        #expect(third.head.status == 200)
    }

    /// A window does not replay: a stream that resumes gets its rows afresh as a snapshot, for
    /// the single stream and for a watch of a multiplexed one.
    @Test func resumedWindows_StartAgainWithASnapshotOfTheirRows() throws {
        let library = try live.createLibrary()
        let books = try ["b", "a", "c"].map { try live.createBook(in: library, title: $0) }
        let single = try live.events("/books/events?libraryId=\(library)&sort=title&limit=2&fields=title")
        let first = try #require(try single.next())
        #expect(LiveQueryTests.ids(first.json["items"]) == [books[1], books[0]])
        try write("PATCH", "/books/\(books[2])", #"{"title":"0"}"#)
        // The window has the change (a live side fed from the change log hears of it later).
        #expect(LiveQueryTests.ids(try #require(try single.next()).json["added"]) == [books[2]])
        let resumed = try live.events(
            "/books/events?libraryId=\(library)&sort=title&limit=2&fields=title", headers: ["Last-Event-ID": first.id!])
        let again = try #require(try resumed.next())
        #expect(again.event == "snapshot")
        #expect(LiveQueryTests.ids(again.json["items"]) == [books[2], books[1]])

        let watch = "/books?libraryId=\(library)&sort=title&limit=2&fields=title"
        let stream = try live.events(WatchStreamTests.query([watch]))
        let frame = try #require(try stream.next())
        let multiplexed = try live.events(WatchStreamTests.query([watch], lastEventID: frame.id))
        let entry = try #require(try multiplexed.next()?.entries.first)
        #expect(entry["event"] as? String == "snapshot")
        #expect(LiveQueryTests.ids((entry["data"] as? [String: Any])?["items"]) == [books[2], books[1]])
    }
}
