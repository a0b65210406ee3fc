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

    @Test func `a stale write whose field changed meanwhile is a conflict carrying the server's state`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)  // version 1, nothing watched
        try rest.patchBook(id, #"{"title":"Someone else's"}"#)
        let error = await failure { try await client.update(book) { $0.title = "Mine" } }
        guard case .conflict(let current, _)? = error else {
            Issue.record("expected a conflict, got \(String(describing: error))")
            return
        }
        #expect(current[BookField.title] == .string("Someone else's"))
        #expect(book.title == "Someone else's")
        #expect(
            try rest.call("GET", "/books/\(id.uuidString.lowercased())").json["title"] as? String == "Someone else's")
    }

    @Test func `two awaited writes of a field that meets a conflict both throw it`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)  // version 1, nothing watched
        try rest.patchBook(id, #"{"title":"Someone else's"}"#)
        let first = Task { await failure { try await client.update(book) { $0.title = "A" } } }
        let second = Task { await failure { try await client.update(book) { $0.title = "B" } } }
        for outcome in [await first.value, await second.value] {
            guard case .conflict? = outcome else {
                Issue.record("expected a conflict, got \(String(describing: outcome))")
                continue
            }
        }
        #expect(book.title == "Someone else's" && !book.hasPendingWrites)
    }

    @Test func `a stale write whose fields nobody else changed goes through with the new version`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)
        try rest.patchBook(id, #"{"author":"Frank Herbert"}"#)
        try await client.update(book) { $0.title = "Dune (1965)" }
        let stored = try rest.call("GET", "/books/\(id.uuidString.lowercased())").json
        #expect(stored["title"] as? String == "Dune (1965)" && stored["author"] as? String == "Frank Herbert")
        #expect(book.title == "Dune (1965)" && book.version == 3)
    }

    @Test func `an optimistic write shows at once and rolls back when the server refuses it`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())
        let write = Task { try await client.update(book) { $0.title = String(repeating: "x", count: 501) } }
        let result = await write.result
        guard case .failure(let error as LibraryClientError) = result, case .validation(let problems) = error else {
            Issue.record("expected a validation error, got \(result)")
            return
        }
        #expect(problems.map { $0.field } == ["title"])
        #expect(await eventually { view.value == "Dune" })
        #expect(book.title == "Dune")
        // The view showed the optimistic value while the write was in flight, then the server's.
        #expect(view.history.map(\.count) == [4, 501, 4])
    }

    @Test func `a write's answer and its event apply once, in either order`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())
        try await client.update(book) { $0.title = "Arrakis" }
        try await Task.sleep(for: .milliseconds(300))
        // Rendered for the optimistic value, and never again: the answer and the event agree.
        #expect(view.history == ["Dune", "Arrakis"])
    }

    /// PATCHes of books the server has answered, by its metrics.
    func bookPatches() throws -> Int {
        try rest.call("GET", "/metrics").text.split(separator: "\n")
            .filter { $0.hasPrefix(#"library_http_requests_total{route="/books/{id}",method="PATCH""#) }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
    }

    @Test func `typing into a bound title writes a few PATCHes, loses no character and never goes back`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Old", author: "A")
        let book = try await client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await client.settled())
        let before = try bookPatches()
        // Someone else changes the author meanwhile: the stream brings it, and the version moves.
        let rest = self.rest
        let other = Task.detached {
            for number in 0..<5 {
                try? rest.patchBook(id, #"{"author":"Author \#(number)"}"#)
                try? await Task.sleep(for: .milliseconds(3))
            }
        }
        // What `TextField("Title", text: $book.title)` with `@Bindable var book` writes through.
        let binding: ReferenceWritableKeyPath<Book, String> = \.title
        var typed = ""
        for character in "Dune" {
            typed.append(character)
            book[keyPath: binding] = typed
            #expect(book.title == typed && book.hasPendingWrites)
            try await Task.sleep(for: .milliseconds(2))
        }
        await other.value
        #expect(await eventually { !book.hasPendingWrites })
        #expect(book.title == "Dune" && book.writeError == nil && book.conflict == nil)
        #expect(try rest.call("GET", "/books/\(id.uuidString.lowercased())").json["title"] as? String == "Dune")
        #expect(await eventually { view.value == "Dune" && book.author == "Author 4" })
        // Every value shown after the first keystroke is a prefix of the next one shown.
        let shown = Array(view.history.drop { $0 == "Old" })
        #expect(shown.first == "D" && zip(shown, shown.dropFirst()).allSatisfy { $1.hasPrefix($0) }, "\(shown)")
        // At most one title write per keystroke, the others' five, and a resend per stale version.
        let titleWrites = try bookPatches() - before - 5
        #expect((1...8).contains(titleWrites), "\(titleWrites) title PATCHes")
    }

    @Test func `a set that meets someone else's change of the field is a conflict the app resolves`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let book = try await client.book(id: id)  // version 1, nothing watched yet
        try rest.patchBook(id, #"{"title":"Theirs"}"#)
        book.title = "Mine"
        #expect(await eventually { book.conflict != nil })
        #expect(book.conflict?.theirs[BookField.title] == .string("Theirs"))
        #expect(book.conflict?.mine[BookField.title] == .string("Mine"))
        #expect(book.title == "Mine" && book.hasPendingWrites)
        // An awaited write meanwhile is told of the conflict at once, and changes nothing.
        let held = await failure { try await client.update(book) { $0.author = "Someone" } }
        guard case .conflict? = held else {
            Issue.record("expected a conflict, got \(String(describing: held))")
            return
        }
        book.resolveConflict(.keepMine)
        #expect(await eventually { !book.hasPendingWrites })
        #expect(book.conflict == nil && book.title == "Mine")
        let stored = try rest.call("GET", "/books/\(id.uuidString.lowercased())").json
        #expect(stored["title"] as? String == "Mine" && stored["author"] as? String == "")

        // Again on another book, and the server's side wins this time; a refused value rolls back.
        let other = try await client.book(id: try rest.createBook(library, "Emma"))
        try rest.patchBook(other.id, #"{"title":"Their Emma"}"#)
        other.title = "My Emma"
        #expect(await eventually { other.conflict != nil })
        other.resolveConflict(.takeTheirs)
        #expect(!other.hasPendingWrites && other.conflict == nil && other.title == "Their Emma")
        other.title = ""  // a title is 1 to 500 characters
        #expect(other.title == "" && other.hasPendingWrites)
        #expect(await eventually { !other.hasPendingWrites })
        guard case .validation(let problems)? = other.writeError else {
            Issue.record("expected a validation error, got \(String(describing: other.writeError))")
            return
        }
        #expect(problems.map(\.field) == ["title"] && other.title == "Their Emma")
        other.title = "Emma"
        #expect(await eventually { !other.hasPendingWrites && other.writeError == nil })
        #expect(try rest.call("GET", "/books/\(other.id.uuidString.lowercased())").json["title"] as? String == "Emma")
    }

    @Test func `a model and a list say whether the server's state has arrived`() async throws {
        client.maximumBackoff = .milliseconds(300)
        let empty = try await client.library(id: try rest.createLibrary("Empty"))
        #expect(empty.loadState == .loaded)  // read whole
        #expect(!empty.hasLoadedBooks && empty.books.isEmpty)  // not "no books": not arrived yet
        #expect(await eventually { empty.hasLoadedBooks })
        #expect(empty.books.isEmpty)  // now it is an empty library

        let full = try rest.createLibrary("Full")
        let id = try rest.createBook(full, "Dune")
        let library = try await client.library(id: full)
        let view = RenderedView { library.books.map(\.loadState) }
        #expect(await eventually { view.value == [.loaded] })
        #expect(view.history.first == [] && view.history.contains([.loading]), "\(view.history)")
        let book = library.books[0]
        try rest.call("DELETE", "/books/\(id.uuidString.lowercased())")
        #expect(await eventually { book.loadState == .deleted && library.books.isEmpty })

        // A member whose state cannot arrive while the stream is offline says why, then loads.
        _ = try rest.createBook(full, "Emma")
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

    @Test func `the live list of libraries starts an app from nothing`() async throws {
        let list = client.libraries
        #expect(client.libraries === list)  // one per client while held
        let view = RenderedView { (list.isLoaded, list.items.map(\.name)) }
        #expect(await eventually { view.value.0 && view.value.1.isEmpty })  // arrived, and empty
        let central = try rest.createLibrary("Central")
        _ = try rest.createLibrary("Harbour")
        #expect(await eventually { view.value.1 == ["Central", "Harbour"] }, "\(view.history)")
        let created = try await client.createLibrary { $0.name = "Annex" }
        #expect(await eventually { view.value.1 == ["Central", "Harbour", "Annex"] })
        let harbour = list.items[1]
        harbour.name = "Harbour Branch"  // a set, written through the model
        #expect(
            await eventually { view.value.1 == ["Central", "Harbour Branch", "Annex"] && !harbour.hasPendingWrites })
        try rest.call("DELETE", "/libraries/\(central.uuidString.lowercased())")
        #expect(await eventually { view.value.1 == ["Harbour Branch", "Annex"] })
        #expect(list.items.map(\.id).last == created.id)
        let stored = try rest.call("GET", "/libraries?limit=10").json["items"] as? [[String: Any]] ?? []
        #expect(stored.compactMap { $0["name"] as? String } == ["Harbour Branch", "Annex"])
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

    @Test func `a deleted book is marked deleted and leaves its library`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        let model = try await client.library(id: library)
        let book = try await client.book(id: id)
        let view = RenderedView { (model.books.map(\.id), book.isDeleted, model.bookCount) }
        #expect(await client.settled())
        // The view renders again on the main actor after the state it read changed, so its first
        // membership can trail the client's settling by a turn.
        #expect(await eventually { view.value.0 == [id] })
        try rest.call("DELETE", "/books/\(id.uuidString.lowercased())")
        #expect(await eventually { view.value.1 && view.value.0.isEmpty && view.value.2 == 0 })
    }

    @Test func `a live query's members enter and leave as the server decides`() async throws {
        let library = try rest.createLibrary()
        let dune = try rest.createBook(library, "Dune", author: "Frank Herbert")
        _ = try rest.createBook(library, "Emma", author: "Jane Austen")
        let herbert = try await client.books(libraryId: library, author: "Frank Herbert")
        let view = RenderedView { herbert.items.map(\.title) }
        #expect(await eventually { view.value == ["Dune"] })
        let messiah = try rest.createBook(library, "Dune Messiah", author: "Frank Herbert")
        #expect(await eventually { view.value == ["Dune", "Dune Messiah"] })
        try rest.patchBook(dune, #"{"author":"F. Herbert"}"#)
        #expect(await eventually { view.value == ["Dune Messiah"] })
        #expect(herbert.items.map(\.id) == [messiah])
    }

    @Test func `demand ends when no one holds the model`() async throws {
        let library = try rest.createLibrary()
        let id = try rest.createBook(library, "Dune")
        var book: Book? = try await client.book(id: id)
        _ = book?.title
        #expect(await client.settled())
        #expect(client.openWatches.count == 1)
        book = nil
        #expect(await eventually { client.connection == .idle && client.openWatches.isEmpty })
    }

    @Test func `errors come typed from problem+json`() async throws {
        let missing = await failure { try await client.book(id: UUID()) }
        guard case .notFound? = missing else {
            Issue.record("expected notFound, got \(String(describing: missing))")
            return
        }

        let empty = await failure { try await client.createBook { $0.title = "" } }
        guard case .validation(let problems)? = empty else {
            Issue.record("expected validation, got \(String(describing: empty))")
            return
        }
        #expect(problems.map { $0.field }.contains("libraryId"))

        let readOnly = await failure { try await client.createBook { $0.version = 3 } }
        guard case .validation(let fields)? = readOnly else {
            Issue.record("expected validation, got \(String(describing: readOnly))")
            return
        }
        #expect(fields.map { $0.field } == ["version"])

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
