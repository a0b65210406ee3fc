import Foundation
import LibraryClient
import Observation
import TestSupport
import Testing

/// Where a scenario runs: against the real server (SQLite, or PostgreSQL under
/// scripts/postgres-tests.sh), or against the in-memory backend that previews and an app's tests
/// use. Each scenario below runs on both, so the backend is held to the server's behaviour.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case server, memory
    var testDescription: String { rawValue }
}

/// A client under test, and the other users who write beside it.
@MainActor
final class World {
    let client: LibraryClient
    private let server: ServerProcess?
    private let memory: InMemoryLibraryBackend?

    init(_ backend: Backend) throws {
        switch backend {
        case .server:
            let server = try ServerProcess()
            self.server = server
            memory = nil
            client = LibraryClient(baseURL: server.url)
        case .memory:
            let memory = InMemoryLibraryBackend()
            self.memory = memory
            server = nil
            client = LibraryClient(backend: memory)
        }
    }

    private var rest: REST? { server.map { REST(port: $0.port) } }

    func createLibrary(_ name: String = "Central") throws -> UUID {
        if let rest { return try rest.createLibrary(name) }
        return try memory!.addLibrary(name: name)
    }

    func createBook(_ library: UUID, _ title: String, author: String = "") throws -> UUID {
        if let rest { return try rest.createBook(library, title, author: author) }
        return try memory!.addBook(to: library, title: title, author: author)
    }

    /// Another user's change of a book's text fields.
    func patchBook(_ id: UUID, _ values: [BookField: String]) throws {
        if let rest { return try rest.patchBook(id, Self.patch(values)) }
        try memory!.update(book: id, values.mapValues(FieldValue.string))
    }

    /// Another user's writes, for a task of its own: the server's over a socket of their own, off
    /// the main actor (as the client's own tests always wrote), the in-memory backend's on it.
    func writer() -> @Sendable (UUID, [BookField: String]) async throws -> Void {
        if let rest {
            return { id, values in try rest.patchBook(id, Self.patch(values)) }
        }
        let memory = memory!
        return { id, values in
            try await MainActor.run { try memory.update(book: id, values.mapValues(FieldValue.string)) }
        }
    }

    private nonisolated static func patch(_ values: [BookField: String]) -> String {
        "{" + values.map { "\"\($0.key.name)\":\(quoted($0.value))" }.sorted().joined(separator: ",") + "}"
    }

    func deleteBook(_ id: UUID) throws {
        if let rest {
            try rest.call("DELETE", "/books/\(id.uuidString.lowercased())")
        } else {
            try memory!.delete(book: id)
        }
    }

    func deleteLibrary(_ id: UUID) throws {
        if let rest {
            try rest.call("DELETE", "/libraries/\(id.uuidString.lowercased())")
        } else {
            try memory!.delete(library: id)
        }
    }

    /// A text field of a book as stored.
    func stored(_ id: UUID, _ field: BookField) throws -> String? {
        if let rest { return try rest.call("GET", "/books/\(id.uuidString.lowercased())").json[field.name] as? String }
        return memory!.storedBook(id)?[field]?.string
    }

    /// The stored libraries' names, in creation order.
    func libraryNames() throws -> [String] {
        if let rest {
            let items = try rest.call("GET", "/libraries?limit=10").json["items"] as? [[String: Any]] ?? []
            return items.compactMap { $0["name"] as? String }
        }
        return memory!.libraryIDs.compactMap { memory!.storedLibrary($0)?[.name]?.string }
    }

    /// PATCHes of books answered so far: by the server's metrics, or by the backend's log.
    func bookPatches() throws -> Int {
        if let rest {
            return try rest.call("GET", "/metrics").text.split(separator: "\n")
                .filter { $0.hasPrefix(#"library_http_requests_total{route="/books/{id}",method="PATCH""#) }
                .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
        }
        return memory!.requestLog.filter { $0.hasPrefix("PATCH /books/") }.count
    }

    private nonisolated static func quoted(_ text: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [text], options: [.fragmentsAllowed])
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }
}

/// The client's scenarios, each on the server and on the in-memory backend.
@MainActor
@Suite(.serialized) struct ClientScenarios {
    @Test(arguments: Backend.allCases)
    func `reading a field subscribes to that field, and a second view widens the same model's watch`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let client = world.client
        let id = try world.createBook(try world.createLibrary(), "Dune", author: "Frank Herbert")
        let book = try await client.book(id: id)
        #expect(client.connection == .idle)  // nothing read yet: no stream

        let view = RenderedView { book.title }
        #expect(await client.settled())
        #expect(client.openWatches == ["/books/\(id.uuidString.lowercased())?fields=title"])
        let detail = RenderedView { (book.title, book.author) }
        #expect(await client.settled())
        #expect(client.openWatches == ["/books/\(id.uuidString.lowercased())?fields=title,author"])
        #expect(try await client.book(id: id) === book)
        #expect(view.value == "Dune" && detail.value.1 == "Frank Herbert")
        #expect(client.streamsOpened == 1)
    }

    @Test(arguments: Backend.allCases)
    func `a change of a field no view reads renders nothing`(_ backend: Backend) async throws {
        let world = try World(backend)
        let id = try world.createBook(try world.createLibrary(), "Dune", author: "Frank Herbert")
        let book = try await world.client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await world.client.settled())
        try await Task.sleep(for: .milliseconds(100))
        let renders = view.renders
        let frames = world.client.framesApplied
        try world.patchBook(id, [.author: "Someone Else"])
        try await Task.sleep(for: .milliseconds(300))
        #expect(view.renders == renders && world.client.framesApplied == frames)
        try world.patchBook(id, [.title: "Dune Messiah"])
        #expect(await eventually { view.value == "Dune Messiah" })
        #expect(view.renders == renders + 1)
    }

    @Test(arguments: Backend.allCases)
    func `a stale write whose field changed meanwhile is a conflict carrying the server's state`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let id = try world.createBook(try world.createLibrary(), "Dune")
        let book = try await world.client.book(id: id)  // version 1, nothing watched
        try world.patchBook(id, [.title: "Someone else's"])
        let error = await failure { try await world.client.update(book) { $0.title = "Mine" } }
        guard case .conflict(let current, _)? = error else {
            Issue.record("expected a conflict, got \(String(describing: error))")
            return
        }
        #expect(current[BookField.title] == .string("Someone else's"))
        #expect(book.title == "Someone else's")
        #expect(try world.stored(id, .title) == "Someone else's")
    }

    @Test(arguments: Backend.allCases)
    func `two awaited writes of a field that meets a conflict both throw it`(_ backend: Backend) async throws {
        let world = try World(backend)
        let client = world.client
        let id = try world.createBook(try world.createLibrary(), "Dune")
        let book = try await client.book(id: id)  // version 1, nothing watched
        try world.patchBook(id, [.title: "Someone else's"])
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

    @Test(arguments: Backend.allCases)
    func `a stale write whose fields nobody else changed goes through with the new version`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let id = try world.createBook(try world.createLibrary(), "Dune")
        let book = try await world.client.book(id: id)
        try world.patchBook(id, [.author: "Frank Herbert"])
        try await world.client.update(book) { $0.title = "Dune (1965)" }
        #expect(try world.stored(id, .title) == "Dune (1965)" && world.stored(id, .author) == "Frank Herbert")
        #expect(book.title == "Dune (1965)" && book.version == 3)
    }

    @Test(arguments: Backend.allCases)
    func `an optimistic write shows at once and rolls back when the server refuses it`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let client = world.client
        let book = try await client.book(id: try world.createBook(try world.createLibrary(), "Dune"))
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

    @Test(arguments: Backend.allCases)
    func `a write's answer and its event apply once, in either order`(_ backend: Backend) async throws {
        let world = try World(backend)
        let book = try await world.client.book(id: try world.createBook(try world.createLibrary(), "Dune"))
        let view = RenderedView { book.title }
        #expect(await world.client.settled())
        try await world.client.update(book) { $0.title = "Arrakis" }
        try await Task.sleep(for: .milliseconds(300))
        // Rendered for the optimistic value, and never again: the answer and the event agree.
        #expect(view.history == ["Dune", "Arrakis"])
    }

    @Test(arguments: Backend.allCases)
    func `typing into a bound title writes a few PATCHes, loses no character and never goes back`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let id = try world.createBook(try world.createLibrary(), "Old", author: "A")
        let book = try await world.client.book(id: id)
        let view = RenderedView { book.title }
        #expect(await world.client.settled())
        let before = try world.bookPatches()
        // Someone else changes the author meanwhile: the stream brings it, and the version moves.
        let write = world.writer()
        let other = Task.detached {
            for number in 0..<5 {
                try? await write(id, [.author: "Author \(number)"])
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
        #expect(try world.stored(id, .title) == "Dune")
        #expect(await eventually { view.value == "Dune" && book.author == "Author 4" })
        // Every value shown after the first keystroke is a prefix of the next one shown.
        let shown = Array(view.history.drop { $0 == "Old" })
        #expect(shown.first == "D" && zip(shown, shown.dropFirst()).allSatisfy { $1.hasPrefix($0) }, "\(shown)")
        // At most one title write per keystroke, the others' five, and a resend per stale version.
        let titleWrites = try world.bookPatches() - before - 5
        #expect((1...8).contains(titleWrites), "\(titleWrites) title PATCHes")
    }

    @Test(arguments: Backend.allCases)
    func `a set that meets someone else's change of the field is a conflict the app resolves`(
        _ backend: Backend
    ) async throws {
        let world = try World(backend)
        let client = world.client
        let library = try world.createLibrary()
        let id = try world.createBook(library, "Dune")
        let book = try await client.book(id: id)  // version 1, nothing watched yet
        try world.patchBook(id, [.title: "Theirs"])
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
        #expect(try world.stored(id, .title) == "Mine" && world.stored(id, .author) == "")

        // Again on another book, and the server's side wins this time; a refused value rolls back.
        let other = try await client.book(id: try world.createBook(library, "Emma"))
        try world.patchBook(other.id, [.title: "Their Emma"])
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
        #expect(try world.stored(other.id, .title) == "Emma")
    }

    @Test(arguments: Backend.allCases)
    func `a model and a list say whether the server's state has arrived`(_ backend: Backend) async throws {
        let world = try World(backend)
        let client = world.client
        let empty = try await client.library(id: try world.createLibrary("Empty"))
        #expect(empty.loadState == .loaded)  // read whole
        #expect(!empty.hasLoadedBooks && empty.books.isEmpty)  // not "no books": not arrived yet
        #expect(await eventually { empty.hasLoadedBooks })
        #expect(empty.books.isEmpty)  // now it is an empty library

        let full = try world.createLibrary("Full")
        let id = try world.createBook(full, "Dune")
        let library = try await client.library(id: full)
        let view = RenderedView { library.books.map(\.loadState) }
        #expect(await eventually { view.value == [.loaded] })
        #expect(view.history.first == [] && view.history.contains([.loading]), "\(view.history)")
        let book = library.books[0]
        try world.deleteBook(id)
        #expect(await eventually { book.loadState == .deleted && library.books.isEmpty })
    }

    @Test(arguments: Backend.allCases)
    func `the live list of libraries starts an app from nothing`(_ backend: Backend) async throws {
        let world = try World(backend)
        let client = world.client
        let list = client.libraries
        #expect(client.libraries === list)  // one per client while held
        let view = RenderedView { (list.isLoaded, list.items.map(\.name)) }
        #expect(await eventually { view.value.0 && view.value.1.isEmpty })  // arrived, and empty
        let central = try world.createLibrary("Central")
        _ = try world.createLibrary("Harbour")
        #expect(await eventually { view.value.1 == ["Central", "Harbour"] }, "\(view.history)")
        let created = try await client.createLibrary { $0.name = "Annex" }
        #expect(await eventually { view.value.1 == ["Central", "Harbour", "Annex"] })
        let harbour = list.items[1]
        harbour.name = "Harbour Branch"  // a set, written through the model
        #expect(
            await eventually { view.value.1 == ["Central", "Harbour Branch", "Annex"] && !harbour.hasPendingWrites })
        try world.deleteLibrary(central)
        #expect(await eventually { view.value.1 == ["Harbour Branch", "Annex"] })
        #expect(list.items.map(\.id).last == created.id)
        #expect(try world.libraryNames() == ["Harbour Branch", "Annex"])
    }

    @Test(arguments: Backend.allCases)
    func `a deleted book is marked deleted and leaves its library`(_ backend: Backend) async throws {
        let world = try World(backend)
        let library = try world.createLibrary()
        let id = try world.createBook(library, "Dune")
        let model = try await world.client.library(id: library)
        let book = try await world.client.book(id: id)
        let view = RenderedView { (model.books.map(\.id), book.isDeleted, model.bookCount) }
        #expect(await world.client.settled())
        // The view renders again on the main actor after the state it read changed, so its first
        // membership can trail the client's settling by a turn.
        #expect(await eventually { view.value.0 == [id] })
        try world.deleteBook(id)
        #expect(await eventually { view.value.1 && view.value.0.isEmpty && view.value.2 == 0 })
    }

    @Test(arguments: Backend.allCases)
    func `a live query's members enter and leave as the server decides`(_ backend: Backend) async throws {
        let world = try World(backend)
        let library = try world.createLibrary()
        let dune = try world.createBook(library, "Dune", author: "Frank Herbert")
        _ = try world.createBook(library, "Emma", author: "Jane Austen")
        let herbert = try await world.client.books(libraryId: library, author: "Frank Herbert")
        let view = RenderedView { herbert.items.map(\.title) }
        #expect(await eventually { view.value == ["Dune"] })
        let messiah = try world.createBook(library, "Dune Messiah", author: "Frank Herbert")
        #expect(await eventually { view.value == ["Dune", "Dune Messiah"] })
        try world.patchBook(dune, [.author: "F. Herbert"])
        #expect(await eventually { view.value == ["Dune Messiah"] })
        #expect(herbert.items.map(\.id) == [messiah])
    }

    @Test(arguments: Backend.allCases)
    func `demand ends when no one holds the model`(_ backend: Backend) async throws {
        let world = try World(backend)
        let id = try world.createBook(try world.createLibrary(), "Dune")
        var book: Book? = try await world.client.book(id: id)
        _ = book?.title
        #expect(await world.client.settled())
        #expect(world.client.openWatches.count == 1)
        book = nil
        #expect(await eventually { world.client.connection == .idle && world.client.openWatches.isEmpty })
    }

    @Test(arguments: Backend.allCases)
    func `errors come typed from problem+json`(_ backend: Backend) async throws {
        let world = try World(backend)
        let client = world.client
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
    }
}

/// What previews and an app's tests get from the in-memory backend beyond the scenarios above.
@MainActor
@Suite struct InMemoryBackendTests {
    @Test func `the sample backend holds a library of books, and latency shows loading and pending states`()
        async throws
    {
        let backend = InMemoryLibraryBackend.sample()
        backend.latency = .milliseconds(50)
        let client = LibraryClient(backend: backend)
        let list = client.libraries
        let view = RenderedView { (list.isLoaded, list.items.map(\.name)) }
        #expect(view.value.0 == false)
        // Generous waits: `swift test` keeps both cores of a CI machine busy for about 90 s, and the
        // client's stream reader queues behind it for a thread of the cooperative pool (a CI run
        // timed out at 60 s). Only a failure waits this long.
        #expect(await eventually(.seconds(300)) { view.value == (true, ["Central Library"]) }, "\(view.history)")
        let library = try #require(list.items.first)
        let rows = RenderedView { library.books.map(\.title) }
        #expect(await eventually(.seconds(300)) { rows.value.count == 5 && !rows.value.contains("") }, "\(rows.value)")
        #expect(rows.value.first == "Dune")
        let dune = try #require(library.books.first)
        dune.title = "Dune (1965)"
        #expect(dune.hasPendingWrites)  // the write waits out the latency
        #expect(await eventually(.seconds(300)) { !dune.hasPendingWrites })
        #expect(backend.storedBook(dune.id)?[.title] == .string("Dune (1965)"))
    }

    @Test func `the backend checks bodies by the field table, as the server does`() throws {
        let backend = InMemoryLibraryBackend()
        let library = try backend.addLibrary(name: "Central")
        #expect(throws: LibraryClientError.self) { try backend.addBook(to: library, title: "") }
        #expect(throws: LibraryClientError.self) {
            try backend.addBook(to: library, title: "X", isbn: "978-0-00-000000-1")
        }
        #expect(throws: LibraryClientError.self) { try backend.addBook(to: UUID(), title: "Nowhere") }
        let book = try backend.addBook(to: library, title: "Dune", isbn: "978-0-441-17271-9", publishedYear: 1965)
        #expect(throws: LibraryClientError.self) { try backend.update(book: book, [.publishedYear: .int(10_000)]) }
        #expect(throws: LibraryClientError.self) { try backend.update(book: book, [.available: .string("yes")]) }
        #expect(backend.storedBook(book)?[.publishedYear] == .int(1965))
        #expect(backend.storedLibrary(library)?[.bookCount] == .int(1))
        try backend.delete(library: library)
        #expect(backend.storedBook(book) == nil && backend.libraryIDs.isEmpty)
    }
}
