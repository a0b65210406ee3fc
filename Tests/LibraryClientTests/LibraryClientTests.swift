import Foundation
import LibraryClient
import Observation
import TestSupport
import Testing

/// The client against the real server (SQLite, or PostgreSQL under scripts/postgres-tests.sh),
/// through a TCP proxy that counts the bytes on the wire and cuts connections.
@MainActor
@Suite(.serialized) struct LibraryClientTests {
    let server: ServerProcess
    let proxy: TCPProxy
    let rest: REST
    let client: LibraryClient

    init() throws {
        server = try ServerProcess()
        proxy = try TCPProxy(upstreamPort: server.port)
        rest = REST(port: server.port)
        client = LibraryClient(baseURL: URL(string: "http://127.0.0.1:\(proxy.port)")!)
    }

    @Test func `reading a field subscribes to that field and to nothing else, on the wire`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune", author: "Frank Herbert")
        let book = try await client.book(id: id)
        #expect(client.connection == .idle)  // nothing read yet: no stream

        let view = RenderedView { book.title }
        #expect(await client.settled())
        let watch = "/books/\(id.uuidString.lowercased())?fields=title"
        #expect(client.openWatches == [watch])
        #expect(
            proxy.sentText.contains(#""watches":["\#(watch.replacingOccurrences(of: "/", with: "\\/"))"]"#)
                || proxy.sentText.contains(watch))

        // A second view reads the author of the same book: one model, the watch widens.
        let detail = RenderedView { (book.title, book.author) }
        #expect(await client.settled())
        #expect(client.openWatches == ["/books/\(id.uuidString.lowercased())?fields=title,author"])
        #expect(try await client.book(id: id) === book)
        #expect(view.value == "Dune" && detail.value.1 == "Frank Herbert")
        // The open stream changed its watches through its side channel: no second connection.
        #expect(client.streamsOpened == 1)
        #expect(proxy.sentText.contains("POST /events/"))
    }

    @Test func `demand that grows and shrinks moves the open stream, losing nothing`() async throws {
        let library = try rest.createLibrary()
        let first = try rest.createBook(library, "One")
        let second = try rest.createBook(library, "Two")
        let one = try await client.book(id: first)
        let view = RenderedView { one.title }
        #expect(await client.settled())

        // A second model's demand joins the stream while writes go on.
        var two: Book? = try await client.book(id: second)
        let other = RenderedView { two?.author ?? "" }
        try rest.patchBook(second, #"{"author":"Written meanwhile"}"#)
        try rest.patchBook(first, #"{"title":"One, changed meanwhile"}"#)
        #expect(await eventually { other.value == "Written meanwhile" && view.value == "One, changed meanwhile" })
        #expect(client.openWatches.count == 2)

        // The second model goes: its watch leaves the stream, the first keeps working.
        two = nil
        #expect(await eventually { client.openWatches.count == 1 })
        try rest.patchBook(first, #"{"title":"One, after"}"#)
        #expect(await eventually { view.value == "One, after" })
        #expect(client.streamsOpened == 1)
        #expect(client.watchChanges >= 2)
    }

    @Test func `an author change sends no byte and renders nothing in a title-only view`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune", author: "Frank Herbert")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())
        try await Task.sleep(for: .milliseconds(100))
        let bytes = proxy.bytesDown
        let renders = view.renders

        try rest.patchBook(id, #"{"author":"Someone Else"}"#)
        try await Task.sleep(for: .milliseconds(300))
        #expect(proxy.bytesDown == bytes)
        #expect(view.renders == renders)

        try rest.patchBook(id, #"{"title":"Dune Messiah"}"#)
        #expect(await eventually { view.value == "Dune Messiah" })
        #expect(view.renders == renders + 1)
        #expect(proxy.bytesDown > bytes)
    }

    @Test func `a thousand live models share one stream`() async throws {
        let library = try rest.createLibrary()
        for index in 0..<1_000 { _ = try rest.createBook(library, "Book \(index)") }
        let model = try await client.library(id: library)
        let screen = RenderedView { model.books.map(\.title) }
        #expect(await eventually { screen.value.count == 1_000 && screen.value.allSatisfy { !$0.isEmpty } })
        #expect(await client.settled())
        #expect(client.openWatches.count == 1_001)
        // Membership first, then the rows' titles added to the same stream: one connection.
        #expect(client.streamsOpened == 1)
        #expect(client.watchChanges >= 1)

        let third = model.books[3]
        try rest.patchBook(third.id, #"{"title":"Renamed"}"#)
        #expect(await eventually { screen.value[3] == "Renamed" })
        let added = try rest.createBook(library, "Book 1000")
        #expect(await eventually { screen.value.count == 1_001 && screen.value.last == "Book 1000" })
        #expect(model.books.last?.id == added)
    }

    @Test func `a cut connection resumes without losing or repeating a change`() async throws {
        let library = try rest.createLibrary()
        let ids = try (0..<5).map { try rest.createBook(library, "Title \($0)") }
        var books: [Book] = []
        for id in ids { books.append(try await client.book(id: id)) }
        let view = RenderedView { books.map(\.title) }
        #expect(await client.settled())
        let opened = client.streamsOpened

        proxy.cutAll()
        for (index, id) in ids.enumerated() { try rest.patchBook(id, #"{"title":"Changed \#(index)"}"#) }
        #expect(await eventually(.seconds(15)) { view.value == (0..<5).map { "Changed \($0)" } })
        #expect(client.streamsOpened == opened + 1)
        // The reconnection resumed (no snapshot asked for): the body named every watch to resume.
        #expect(proxy.sentText.contains(#""resume""#))
        #expect(proxy.sentText.contains(#""lastEventId""#))
        // Each title changed once: one render for the five changes folded into one frame, or a few, never a repeat.
        #expect(Set(view.history).count == view.history.count || view.history.last == view.value)
    }

    @Test func `a server restart is resumed from the change log`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Before")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())

        server.stop()
        // The connection state says so while the server is away, with the next attempt.
        #expect(
            await eventually {
                if case .offline(let next, _) = client.connection { return next > Date() - 1 }
                return false
            })
        try server.start()
        proxy.retarget(server.port)
        // Written before the client is back: only the resume can bring it.
        try REST(port: server.port).patchBook(id, #"{"title":"After"}"#)
        #expect(await eventually(.seconds(15)) { view.value == "After" })
        #expect(client.connection == .live)
    }

    @Test func `a resume older than the server's history gets fresh state`() async throws {
        let short = try ServerProcess(["--history", "3"])
        let shortProxy = try TCPProxy(upstreamPort: short.port)
        let shortREST = REST(port: short.port)
        let client = LibraryClient(baseURL: URL(string: "http://127.0.0.1:\(shortProxy.port)")!)
        let library = try shortREST.createLibrary()
        let id = try shortREST.createBook(library, "Before")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())

        shortProxy.cutAll()
        for index in 0..<10 { try shortREST.patchBook(id, #"{"title":"Change \#(index)"}"#) }
        #expect(await eventually(.seconds(15)) { view.value == "Change 9" })
        // It asked to resume; the server, past its history, sent the watch a snapshot instead.
        #expect(shortProxy.sentText.contains(#""resume""#))
        #expect(client.connection == .live)
    }

    @Test func `a member whose state cannot arrive while the stream is offline says why, then loads`() async throws {
        client.maximumBackoff = .milliseconds(300)
        let full = try rest.createLibrary("Full")
        _ = try rest.createBook(full, "Emma")
        let library = try await client.library(id: full)
        _ = library.books
        #expect(await eventually { library.books.count == 1 })
        server.stop()
        proxy.cutAll()
        let member = library.books[0]
        let state = RenderedView { member.loadState }
        #expect(
            await eventually {
                if case .failed = state.value { true } else { false }
            }, "\(state.history)")
        try server.start()
        #expect(await eventually(.seconds(20)) { state.value == .loaded }, "\(state.history)")
    }

    @Test func `a POST whose answer was lost is sent again and creates one book`() async throws {
        let library = try rest.createLibrary()
        proxy.dropAnswer(toRequestContaining: "POST /books")
        let book = try await client.createBook {
            $0.libraryId = library
            $0.title = "Exactly once"
        }
        #expect(proxy.dropped == 1)
        let list = try rest.call("GET", "/books?libraryId=\(library.uuidString.lowercased())")
        let titles = (list.json["items"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
        #expect(titles == ["Exactly once"])
        #expect(book.title == "Exactly once")
    }

    @Test func `a write without the server's token is refused as unauthorized`() async throws {
        let locked = try ServerProcess(["--api-token", "secret-token-1234"])
        let anonymous = LibraryClient(baseURL: locked.url)
        let refused = await failure { try await anonymous.createLibrary { $0.name = "Nope" } }
        guard case .unauthorized? = refused else {
            Issue.record("expected unauthorized, got \(String(describing: refused))")
            return
        }
        let authorized = LibraryClient(baseURL: locked.url, apiToken: "secret-token-1234")
        #expect(try await authorized.createLibrary { $0.name = "Yes" }.name == "Yes")
    }
}
