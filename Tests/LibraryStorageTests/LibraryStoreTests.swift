import Dispatch
import Foundation
import LibraryDomain
import SQLite
import Synchronization
import Testing

@testable import LibraryStorage

@Suite struct LibraryStoreTests {
    let store = try! LibraryStore(path: ":memory:")

    @Test func migrations_ApplyEveryFileFromAnEmptyDatabase() throws {
        let migrator = try LibraryMigrations.migrator()
        #expect(!migrator.migrations.isEmpty)
        #expect(store.appliedMigrations.map(\.name) == migrator.migrations.map(\.name))
        let tables = try store.writeAndWait { writer in
            try writer.connection.statement("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").map {
                $0.text(0)
            }
        }
        #expect(tables.contains("libraries"))
        #expect(tables.contains("books"))
        #expect(tables.contains("schema_migrations"))
    }

    /// Every subset of the book filters, as `GET /books` and `GET /libraries/{id}/books` combine them.
    static let filterCombinations: [BookFilter] = [nil, "3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b"].flatMap { library in
        [nil, "Herbert"].flatMap { author in
            [nil, true, false].map { BookFilter(libraryId: library, author: author, available: $0) }
        }
    }

    @Test(arguments: filterCombinations)
    func bookFilters_EachUseAnIndexThatFitsThem(filter: BookFilter) throws {
        let (sql, values) = LibraryReader.booksQuery(filter, after: 10, limit: 50)
        let plan = try store.writeAndWait { writer in
            try writer.connection.statement("EXPLAIN QUERY PLAN " + sql).map(values) { $0.text(3) }
        }
        let text = plan.joined(separator: " | ")
        #expect(plan.count == 1, "one search, no sort: \(text)")
        #expect(!text.contains("SCAN"), "\(text)")
        #expect(!text.contains("TEMP B-TREE"), "\(text)")
        var expected = (filter.libraryId == nil ? [] : ["library_id=?"]) + (filter.author == nil ? [] : ["author=?"])
        if filter.available != nil { expected.append("available=?") }
        if expected.isEmpty {
            #expect(text.contains("INTEGER PRIMARY KEY (rowid>?)"), "\(text)")
        } else {
            #expect(text.contains("(" + (expected + ["seq>?"]).joined(separator: " AND ") + ")"), "\(text)")
        }
    }

    /// What the live engine reads through `LiveStore`: a replay is every change after the id, or
    /// nil once the log no longer holds them all (checked in the same read transaction as the
    /// changes themselves, so a prune in between cannot cut a replay short).
    @Test func changeLogReplay_IsWholeOrNil() throws {
        let store = try LibraryStore(path: ":memory:", history: 10)
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        let book = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "T0")) }
        for index in 1...130 {
            _ = try store.writeAndWait { writer in
                try writer.updateBook(id: book.id, if: .none) { draft in
                    var draft = draft
                    draft.title = "T\(index)"
                    return draft
                }
            }
        }
        let latest = try store.latestCommittedSeq()
        func replay(after seq: Int) throws -> [CommittedChange]? {
            let result = Mutex<Result<[CommittedChange]?, StoreError>?>(nil)
            let done = DispatchSemaphore(value: 0)
            store.changes(of: .book(book.id), after: seq, through: nil) { outcome in
                result.withLock { $0 = outcome }
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            return try #require(result.withLock { $0 }).get()
        }
        let recent = try #require(try replay(after: latest - 5))
        #expect(recent.map(\.seq) == Array(latest - 4...latest))
        #expect(try replay(after: 1) == nil, "pruned history is reported, never a partial replay")
    }

    @Test func concurrentWrites_CommitInGroupsAndAreObservedInSequenceOrder() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Busy")) }
        let seen = Mutex<[Int]>([])
        store.observeCommits { change in seen.withLock { $0.append(change.seq) } }
        let outcomes = Mutex<(created: [String], missing: Int)>(([], 0))
        let group = DispatchGroup()
        for index in 0..<200 {
            group.enter()
            if index % 4 == 3 {  // fails before changing anything
                store.write({ try $0.updateBook(id: Identifier.make(), if: .none) { $0 } }) { result in
                    if case .failure(let error) = result, error.kind == .notFound {
                        outcomes.withLock { $0.missing += 1 }
                    }
                    group.leave()
                }
            } else {
                store.write({ try $0.createBook(BookDraft(libraryId: library.id, title: "Book \(index)")) }) { result in
                    if case .success(let book) = result { outcomes.withLock { $0.created.append(book.id) } }
                    group.leave()
                }
            }
        }
        group.wait()
        let (created, missing) = outcomes.withLock { $0 }
        #expect(created.count == 150)
        #expect(missing == 50)
        let seqs = seen.withLock { $0 }
        #expect(seqs.count == 150)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        let stored = try store.readAndWait { try $0.library(id: library.id)?.bookCount }
        #expect(stored == 150)
    }

    @Test func writes_CountVersionsAndBooks() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Central")) }
        #expect(library.version == 1)
        #expect(library.bookCount == 0)
        let book = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "Dune")) }
        let afterCreate = try store.writeAndWait { try $0.reader.library(id: library.id) }
        #expect(afterCreate?.bookCount == 1)
        #expect(afterCreate?.version == 2)

        let same = try store.writeAndWait { try $0.updateBook(id: book.id, if: .none) { $0 } }
        #expect(same.version == 1)  // a write that changes nothing is not a change

        let renamed = try store.writeAndWait { writer in
            try writer.updateBook(id: book.id, if: .versions([1])) { draft in
                var draft = draft
                draft.title = "Dune Messiah"
                return draft
            }
        }
        #expect(renamed.version == 2)
        #expect(renamed.title == "Dune Messiah")
    }

    @Test func update_ChecksExistenceThenValuesThenPrecondition() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "A")) }
        func kind(_ body: @escaping @Sendable (LibraryWriter) throws -> Void) -> StoreError.Kind? {
            do {
                try store.writeAndWait(body)
                return nil
            } catch {
                return error.kind
            }
        }
        #expect(kind { _ = try $0.updateLibrary(id: Identifier.make(), if: .none) { $0 } } == .notFound)
        #expect(
            kind { _ = try $0.updateLibrary(id: library.id, if: .versions([9])) { _ in LibraryDraft(name: "") } }
                == .invalid([FieldError("name", "must be 1 to 200 characters long")]))
        #expect(
            kind { _ = try $0.updateLibrary(id: library.id, if: .versions([9])) { _ in LibraryDraft(name: "B") } }
                == .preconditionFailed)
        #expect(
            kind { _ = try $0.updateLibrary(id: library.id, if: .none) { _ in LibraryDraft(name: "") } }
                == .invalid([FieldError("name", "must be 1 to 200 characters long")]))
        #expect(
            kind { _ = try $0.createBook(BookDraft(libraryId: Identifier.make(), title: "x")) }
                == .invalid([FieldError("libraryId", "no library has this id")]))
    }

    @Test func move_UpdatesBothLibraries() throws {
        let a = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "A")) }
        let b = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "B")) }
        let book = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: a.id, title: "t")) }
        var move = BookPatch()
        move.libraryId = b.id
        let patch = move
        let moved = try store.writeAndWait { try $0.updateBook(id: book.id, if: .none) { patch.applied(to: $0) } }
        #expect(moved.libraryId == b.id)
        let counts = try store.writeAndWait { writer in
            (try writer.reader.library(id: a.id)!.bookCount, try writer.reader.library(id: b.id)!.bookCount)
        }
        #expect(counts == (0, 1))
    }

    @Test func deleteLibrary_DeletesItsBooks() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Gone")) }
        let book = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "t")) }
        let (_, bookIDs) = try store.writeAndWait { try $0.deleteLibrary(id: library.id, if: .none) }
        #expect(bookIDs == [book.id])
        #expect(try store.writeAndWait { try $0.reader.book(id: book.id) } == nil)
    }

    @Test func pages_CoverEveryRowOnceInInsertionOrder() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Paged")) }
        let ids = try (0..<25).map { index in
            try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "b\(index)")).id }
        }
        var seen: [String] = []
        var after = 0
        while true {
            let position = after
            let page = try store.writeAndWait {
                try $0.reader.books(BookFilter(libraryId: library.id), after: position, limit: 7)
            }
            seen += page.items.map(\.id)
            guard let next = page.next else { break }
            after = next
        }
        #expect(seen == ids)
    }
}
