import Foundation
import TestSupport
import Testing

/// Signed tokens' rights on every stream and watch, for the stream's whole life: what cannot be
/// read is refused as if it did not exist, collections carry only readable items (a book moved
/// in arrives, one moved out leaves), a stream ends with `expired` when its token does, and the
/// side channel takes a new token of the same principal only. On every engine (LiveServer).
@Suite struct PerUserStreamTests {
    typealias World = PerUserAccessTests.World
    static let now = PerUserAccessTests.now

    func stream(_ world: World, _ path: String, _ token: String) throws -> EventStreamClient {
        try world.live.events(path, headers: ["Authorization": "Bearer \(token)"])
    }

    func posted(_ world: World, _ watches: [String], _ token: String) throws -> EventStreamClient {
        try EventStreamClient(
            port: world.live.port, path: "/events", headers: ["Authorization": "Bearer \(token)"],
            body: PostedWatchStreamTests.body(watches))
    }

    func ids(_ value: Any?) -> Set<String> {
        Set((value as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
    }

    /// A window holds the first rows of the list its subscriber's rights give, as `GET /books`
    /// with the same query and token does: a readable book moved out leaves it (the next
    /// readable row enters), one moved in enters, and subscribers of other rights have windows of
    /// their own.
    @Test func windowsHoldTheFirstRowsOfWhatTheirSubscriberMayRead() throws {
        let world = try World()
        let admin = world.admin
        for title in ["Anna", "Zed"] {
            _ = try world.call(
                "POST", "/books", admin, body: #"{"libraryId":"\#(world.eastside)","title":"\#(title)"}"#)
        }
        let query = "sort=title&limit=2&fields=title"
        let readerStream = try stream(world, "/books/events?\(query)", world.reader)
        let adminStream = try stream(world, "/books/events?\(query)", admin)
        func check(_ stream: EventStreamClient, _ model: CollectionModel, _ token: String) throws {
            let deadline = Date().addingTimeInterval(5)
            repeat {
                stream.drain(quiet: 200).forEach(model.apply)
            } while try !matches(model, token) && Date() < deadline
            #expect(try matches(model, token), "\(model.list)")
        }
        func matches(_ model: CollectionModel, _ token: String) throws -> Bool {
            let listed = try world.call("GET", "/books?\(query)", token)
            return Set(model.items.keys) == world.ids(listed)
        }
        let readerModel = CollectionModel(list: "/books?\(query)", fields: ["title"])
        let adminModel = CollectionModel(list: "/books?\(query)", fields: ["title"])
        try check(readerStream, readerModel, world.reader)
        try check(adminStream, adminModel, admin)
        #expect(Set(readerModel.items.keys) == [world.centralBook])
        #expect(adminModel.items.count == 2 && adminModel.items.keys.contains(world.centralBook), "Anna, Dune")
        // Dune moves out of what the reader reads, Anna into it.
        let anna = try #require(
            (try world.call("GET", "/books?sort=title&limit=1", admin).json["items"] as? [[String: Any]])?.first?["id"]
                as? String)
        #expect(
            try world.call("PATCH", "/books/\(world.centralBook)", admin, body: #"{"libraryId":"\#(world.eastside)"}"#)
                .status == 200)
        #expect(
            try world.call("PATCH", "/books/\(anna)", admin, body: #"{"libraryId":"\#(world.central)"}"#).status == 200)
        try check(readerStream, readerModel, world.reader)
        try check(adminStream, adminModel, admin)
        #expect(Set(readerModel.items.keys) == [anna])
    }

    @Test func streamsOfWhatCannotBeReadAre404sLikeThoseOfWhatDoesNotExist() throws {
        let world = try World()
        let reader = world.reader  // reads Central only
        let missing = "00000000-0000-4000-8000-000000000009"
        for (path, absent) in [
            ("/libraries/\(world.hidden)/events", "/libraries/\(missing)/events"),
            ("/books/\(world.eastsideBook)/events", "/books/\(missing)/events"),
            ("/events?watch=/libraries/\(world.hidden)", "/events?watch=/libraries/\(missing)"),
        ] {
            let refused = try stream(world, path, reader)
            let nothing = try stream(world, absent, reader)
            #expect(refused.head.status == 404, "\(path)")
            #expect(nothing.head.status == 404, "\(absent)")
            let detail = refused.head.json["detail"] as? String ?? ""
            let missingDetail = nothing.head.json["detail"] as? String ?? ""
            #expect(
                detail.replacingOccurrences(of: world.hidden, with: missing) == missingDetail
                    || detail.replacingOccurrences(of: world.eastsideBook, with: missing) == missingDetail, "\(detail)")
        }
        // A collection filtered by an unreadable library: a 404 from the rights alone, as the list.
        #expect(try stream(world, "/books/events?libraryId=\(world.eastside)", reader).head.status == 404)
        #expect(try world.call("GET", "/books?libraryId=\(world.eastside)", reader).status == 404)
        // What it reads opens.
        let central = try stream(world, "/libraries/\(world.central)/events?fields=name", reader)
        #expect(central.head.status == 200)
        #expect(try central.next()?.event == "snapshot")
        let book = try stream(world, "/books/\(world.centralBook)/events?fields=title", reader)
        #expect(try book.next()?.json["title"] as? String == "Dune")
        // The static read token still reads every stream.
        #expect(try stream(world, "/libraries/\(world.hidden)/events", PerUserAccessTests.readToken).head.status == 200)
    }

    /// A stream's credential is checked as a REST route's is: a token that does not verify is a
    /// 401 naming the rule, whether it comes in `Authorization` or in `?access_token=`.
    @Test func streamsRefuseTokensThatDoNotVerify_InTheHeaderOrTheURL() throws {
        let world = try World()
        let path = "/libraries/\(world.central)/events"
        let expired = world.token("reader-1", #"{"read":["*"]}"#, exp: Self.now - 31)
        let forged = world.token("reader-1", #"{"read":["*"]}"#, signer: PerUserAccessTests.stranger)
        for (name, client) in [
            ("none", try world.live.events(path)),
            ("expired", try stream(world, path, expired)),
            ("bad signature", try stream(world, path, forged)),
            ("expired in the URL", try world.live.events(path + "?access_token=" + expired)),
            ("posted, bad signature", try posted(world, ["/libraries/\(world.central)"], forged)),
        ] {
            #expect(client.head.status == 401, "\(name)")
            #expect(client.head.header("www-authenticate")?.hasPrefix("Bearer") == true, "\(name)")
            #expect(!client.head.text.contains(forged.prefix(20)) && !client.head.text.contains(expired.prefix(20)))
        }
        #expect(try stream(world, path, expired).head.json["detail"] as? String == "The token has expired (exp).")
        #expect(world.live.subscribers == 0)
    }

    /// A stream verifies its token once for its whole life: its opening leaves nothing in the
    /// cache of verified tokens, which keeps the tokens sent with request after request.
    @Test func aStreamsTokenIsNotKept_ARequestsIs() throws {
        let world = try World()
        let token = world.token("reader-9", #"{"read":["*"]}"#)
        let before = world.tokens.cachedTokens
        let stream = try stream(world, "/libraries/\(world.central)/events", token)
        #expect(try stream.next()?.event == "snapshot")
        #expect(world.tokens.cachedTokens == before)
        #expect(try world.call("GET", "/libraries/\(world.central)", token).status == 200)
        #expect(world.tokens.cachedTokens == before + 1)
    }

    @Test func collectionsCarryOnlyReadableItems_BooksMovedInArriveAndMovedOutLeave() throws {
        let world = try World()
        let reader = world.reader
        let books = try stream(world, "/books/events?fields=title", reader)
        let snapshot = try #require(try books.next())
        #expect(ids(snapshot.json["items"]) == [world.centralBook])
        let libraries = try stream(world, "/libraries/events?fields=name", reader)
        #expect(ids(try #require(try libraries.next()).json["items"]) == [world.central])

        // A write in a library it cannot read: nothing. (The next event is the one after.)
        #expect(
            try world.call("PATCH", "/books/\(world.eastsideBook)", world.admin, body: #"{"title":"E"}"#).status == 200)
        #expect(
            try world.call("PATCH", "/libraries/\(world.hidden)", world.admin, body: #"{"name":"H"}"#).status == 200)
        // Moved in: added, with every field asked for.
        let moveIn = #"{"libraryId":"\#(world.central)"}"#
        #expect(try world.call("PATCH", "/books/\(world.eastsideBook)", world.admin, body: moveIn).status == 200)
        let added = try #require(try books.next())
        #expect(added.event == "change")
        #expect(Set(added.json.keys) == ["added"], "\(added.data)")
        #expect((added.json["added"] as? [[String: Any]])?.first?["title"] as? String == "E")
        // Moved out: removed.
        let moveOut = #"{"libraryId":"\#(world.hidden)"}"#
        #expect(try world.call("PATCH", "/books/\(world.centralBook)", world.admin, body: moveOut).status == 200)
        let removed = try #require(try books.next())
        #expect(removed.json["removed"] as? [String] == [world.centralBook], "\(removed.data)")
        // The libraries' stream saw nothing of Hidden's rename; Central's is its next event.
        #expect(
            try world.call("PATCH", "/libraries/\(world.central)", world.admin, body: #"{"name":"C"}"#).status == 200)
        let renamed = try #require(try libraries.next())
        #expect(ids(renamed.json["changed"]) == [world.central], "\(renamed.data)")

        // Resumed from before the moves, the log is cut the same way: the two moves, folded.
        let resumed = try world.live.events(
            "/books/events?fields=title",
            headers: ["Authorization": "Bearer \(reader)", "Last-Event-ID": try #require(snapshot.id)])
        let replay = try #require(try resumed.next())
        #expect(ids(replay.json["added"]) == [world.eastsideBook], "\(replay.data)")
        #expect(replay.json["removed"] as? [String] == [world.centralBook], "\(replay.data)")
        #expect(!replay.data.contains("\"H\""))
    }

    @Test func aBookMovedWhereItsReaderCannotReadIsDeletedForIt() throws {
        let world = try World()
        let book = try stream(world, "/books/\(world.centralBook)/events?fields=title", world.reader)
        let all = try stream(world, "/books/\(world.centralBook)/events?fields=title", PerUserAccessTests.readToken)
        let snapshot = try #require(try book.next())
        _ = try all.next()
        let moveOut = #"{"libraryId":"\#(world.eastside)"}"#
        #expect(try world.call("PATCH", "/books/\(world.centralBook)", world.admin, body: moveOut).status == 200)
        let deleted = try #require(try book.next())
        #expect(deleted.event == "delete")
        #expect(try book.next() == nil)  // the stream ended
        // Who may still read it keeps its stream (a move changes no field it asked for).
        #expect(
            try world.call("PATCH", "/books/\(world.centralBook)", world.admin, body: #"{"title":"D"}"#).status == 200)
        #expect(try all.next()?.json["title"] as? String == "D")
        // Resuming from before the move: a 404, as for any book it cannot read.
        let again = try world.live.events(
            "/books/\(world.centralBook)/events?fields=title",
            headers: ["Authorization": "Bearer \(world.reader)", "Last-Event-ID": try #require(snapshot.id)])
        #expect(again.head.status == 404)
    }

    @Test func aStreamEndsWithExpiredWhenItsTokenExpires_AndItsTokenIsThen401() throws {
        let world = try World()
        // Verifies for one more second (exp + 30 s of leeway).
        let brief = world.token("reader-1", #"{"read":["\#(world.central)"]}"#, exp: Self.now - 29)
        let single = try stream(world, "/libraries/\(world.central)/events?fields=name", brief)
        let watches = try stream(world, "/events?watch=/libraries/\(world.central)?fields=name", brief)
        let posted = try posted(world, ["/books/\(world.centralBook)?fields=title"], brief)
        for client in [single, watches, posted] {
            #expect(client.head.status == 200)
            _ = try client.next()
        }
        for client in [single, watches, posted] {
            let last = try #require(try client.next(timeout: 5000))
            #expect(last.event == "expired", "\(last.data)")
            #expect(last.id == nil)
            #expect((last.json["detail"] as? String)?.contains("expired") == true)
            #expect(try client.next() == nil)
        }
        world.clock.set(Self.now + 1)
        #expect(try stream(world, "/libraries/\(world.central)/events", brief).head.status == 401)
        #expect(world.live.subscribers(settlingAt: 0) == 0)
        let metrics = try world.call("GET", "/metrics", PerUserAccessTests.readToken).text
        #expect(metrics.contains("library_sse_streams_expired_total 3"), "\(metrics)")
    }

    @Test func theSideChannelTakesOnlyItsOpener_AndANewTokenExtendsOrNarrowsTheStream() throws {
        let world = try World()
        let rights = #"{"read":["\#(world.central)","\#(world.eastside)"]}"#
        let brief = world.token("reader-2", rights, exp: Self.now - 29)
        let library = "/libraries/\(world.central)?fields=name"
        let book = "/books/\(world.eastsideBook)?fields=title"
        let stream = try posted(world, [library, book], brief)
        let streamID = try #require(stream.head.header("stream-id"))
        _ = try stream.next()
        func change(_ token: String, _ body: String = "{}") throws -> TestResponse {
            try world.call("POST", "/events/\(streamID)", token, body: body)
        }
        // Another principal, signed or static, may not touch it.
        #expect(try change(world.librarian).status == 403)
        #expect(try change(PerUserAccessTests.readToken).status == 403)
        #expect(try change(world.admin, #"{"add":["/libraries/\#(world.hidden)"]}"#).status == 403)
        // A new token of the same principal extends it past the first one's expiry.
        #expect(try change(world.token("reader-2", rights)).status == 204)
        usleep(1_500_000)
        #expect(
            try world.call("PATCH", "/libraries/\(world.central)", world.admin, body: #"{"name":"C"}"#).status == 200)
        let renamed = try #require(try stream.next())
        #expect(renamed.entries.first?["event"] as? String == "change", "\(renamed.data)")
        // An added watch is checked with the stream's rights: Hidden is answered as absent.
        #expect(try change(world.token("reader-2", rights), #"{"add":["/libraries/\#(world.hidden)"]}"#).status == 204)
        let absent = try #require(try stream.next())
        #expect(absent.entries.map { $0["event"] as? String } == ["delete"], "\(absent.data)")
        // Narrower rights: the watches they no longer cover end with `revoked`; the others go on.
        let narrower = world.token("reader-2", #"{"read":["\#(world.central)"]}"#)
        #expect(try change(narrower).status == 204)
        let revoked = try #require(try stream.next())
        let entries = revoked.entries.map { ($0["watch"] as? String ?? "", $0["event"] as? String ?? "") }
        #expect(entries.map(\.0) == [book] && entries.map(\.1) == ["revoked"], "\(revoked.data)")
        #expect(
            try world.call("PATCH", "/books/\(world.eastsideBook)", world.admin, body: #"{"title":"X"}"#).status == 200)
        #expect(
            try world.call("PATCH", "/libraries/\(world.central)", world.admin, body: #"{"name":"D"}"#).status == 200)
        let next = try #require(try stream.next())
        #expect(next.entries.map { $0["watch"] as? String } == [library], "\(next.data)")
    }
}
