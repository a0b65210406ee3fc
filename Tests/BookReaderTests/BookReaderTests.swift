import BookReader
import Foundation
import LibraryClient
import Observation
import Testing

/// A view as SwiftUI runs one: `body` under `withObservationTracking`, run again after any change
/// of what it read. Keeps what it showed.
@MainActor
final class Rendered<Value> {
    private let body: () -> Value
    private(set) var history: [Value] = []
    var value: Value { history.last! }

    init(_ body: @escaping () -> Value) {
        self.body = body
        render()
    }

    private func render() {
        history.append(
            withObservationTracking(body) { [weak self] in
                Task { @MainActor in self?.render() }
            })
    }
}

@MainActor
func eventually(_ condition: () -> Bool) async -> Bool {
    // Generous: `swift test` keeps both cores of a CI machine busy for about 90 s with suites
    // that block their threads, and the client's stream reader queues behind them for a
    // thread of the cooperative pool (a CI run timed out at 60 s). Only a failure waits this long.
    let deadline = ContinuousClock.now + .seconds(300)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// The porting article's scenes on Linux: the app opens on the first library, the library view
/// waits for its books, each row shows its book's title, and the edit view's binding types a
/// new title while someone else changes the book too.
@MainActor
@Suite struct BookReaderTests {
    @Test func `the ported app opens, lists, edits through the binding and shows the same title everywhere`()
        async throws
    {
        let backend = InMemoryLibraryBackend.sample()
        let reader = BookReader(client: LibraryClient(backend: backend))
        // BookReaderApp: a placeholder until the list of libraries arrives.
        let app = Rendered { reader.library?.name }
        #expect(app.value == nil)
        #expect(await eventually { app.value == "Central Library" })
        let library = try #require(reader.library)

        // LibraryView: loading first, never "No books", then the rows.
        let list = Rendered { library.content }
        #expect(list.history.first == .loading)
        #expect(await eventually { if case .books(let books) = list.value { books.count == 5 } else { false } })
        #expect(!list.history.contains(.empty))
        guard case .books(let books) = list.value, books.count == 5 else { return }
        let rows = books.map { book in Rendered { book.row } }
        #expect(await eventually { rows.allSatisfy { $0.value.title != "…" } })
        #expect(rows[0].value == BookRow(title: "Dune", isSaving: false))
        let listRenders = list.history.count
        let otherRowRenders = rows[1].history.count

        // BookEditView: `TextField("Title", text: $book.title)` writes through this key path,
        // one character at a time, while another user marks the book checked out.
        let dune = books[0]
        let binding: ReferenceWritableKeyPath<Book, String> = \.title
        let sheet = Rendered { dune.title }
        var typed = ""
        for character in "Dune Messiah" {
            typed.append(character)
            dune[keyPath: binding] = typed
            if typed == "Dune M" { try backend.update(book: dune.id, [.available: .bool(false)]) }
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(await eventually { !dune.hasPendingWrites })
        #expect(backend.storedBook(dune.id)?[.title] == .string("Dune Messiah"))
        #expect(await eventually { rows[0].value == BookRow(title: "Dune Messiah", isSaving: false) })
        #expect(sheet.value == "Dune Messiah")
        // The row said "saving" while the edit was in flight, and no title went backwards.
        #expect(rows[0].history.contains { $0.isSaving })
        let titles = rows[0].history.map(\.title).filter { $0.hasPrefix("Dune") }
        #expect(zip(titles, titles.dropFirst()).allSatisfy { $0.count <= $1.count }, "\(titles)")
        // The list read no title, and the other rows read nothing that changed: none re-rendered.
        #expect(list.history.count == listRenders)
        #expect(rows[1].history.count == otherRowRenders)
    }
}
