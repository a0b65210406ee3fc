import Foundation
import SQLite
import Synchronization
import Testing

@testable import LibraryDomain

@Suite struct ISBNTests {
    @Test(arguments: [
        "0-306-40615-2", "0306406152", "080442957X", "0-8044-2957-x", "978-0-306-40615-7", "9780306406157",
    ])
    func accepts(_ isbn: String) {
        #expect(ISBN.isValid(isbn))
    }

    @Test(arguments: [
        "0-306-40615-3", "978-0-306-40615-8", "12345", "", "X804429570", "97803064061570", "-0306406152", "0306406152-",
        "0306--406152", "978030640615X", "abcdefghij",
    ])
    func rejects(_ isbn: String) {
        #expect(!ISBN.isValid(isbn))
    }
}

@Suite struct IdentifierTests {
    @Test func canonical_AcceptsUUIDsInEitherCaseAndLowercasesThem() {
        #expect(Identifier.canonical("0A1B2C3D-4E5F-4a6b-8C7D-9e0f1a2b3c4d") == "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
        #expect(Identifier.canonical("00000000-0000-0000-0000-000000000000") == "00000000-0000-0000-0000-000000000000")
    }

    @Test(arguments: [
        "", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d0",
        "0a1b2c3d4e5f-4a6b-8c7d-9e0f1a2b3c4d-", "0a1b2c3d-4e5f-4a6b-8c7d_9e0f1a2b3c4d",
        "0a1b2c3g-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
        "{a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4}", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3cé",
    ])
    func canonical_RejectsAnythingElse(_ text: String) {
        #expect(Identifier.canonical(text) == nil)
    }

    /// `make` gives version 4 (random) UUIDs, `sequential` version 8 (prefix and counter).
    @Test(arguments: [4, 8])
    func make_AndSequential_GiveDistinctUUIDsOfTheirVersion(version: Int) {
        let next = version == 4 ? Identifier.make : Identifier.sequential
        let ids = (0..<1_000).map { _ in next() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(Identifier.canonical(id) == id)
            #expect(Array(id)[14] == Character(String(version)))
            #expect("89ab".contains(Array(id)[19]))
        }
    }
}

@Suite struct ValidationTests {
    @Test func libraryDraft_ChecksLengths() {
        #expect(LibraryDraft(name: "Central").validate().isEmpty)
        #expect(LibraryDraft(name: "").validate().map(\.field) == ["name"])
        #expect(LibraryDraft(name: String(repeating: "n", count: 201)).validate().map(\.field) == ["name"])
        #expect(
            LibraryDraft(name: "a", address: String(repeating: "a", count: 501)).validate().map(\.field) == ["address"])
    }

    @Test func bookDraft_ChecksEveryField() {
        let library = Identifier.make()
        #expect(
            BookDraft(libraryId: library, title: "Dune", isbn: "9780441172719", publishedYear: 1965).validate().isEmpty)
        let bad = BookDraft(
            libraryId: "nope", title: "", author: String(repeating: "a", count: 301), isbn: "123", publishedYear: 10_000
        )
        #expect(bad.validate().map(\.field) == ["libraryId", "title", "author", "isbn", "publishedYear"])
        #expect(BookDraft(libraryId: library, title: "t", publishedYear: -9999).validate().isEmpty)
    }

    @Test func patch_LeavesAbsentFieldsAndClearsNulls() {
        let draft = LibraryDraft(name: "Old", address: "Main St")
        #expect(LibraryPatch(name: "New").applied(to: draft) == LibraryDraft(name: "New", address: "Main St"))
        #expect(LibraryPatch(address: .some(nil)).applied(to: draft) == LibraryDraft(name: "Old", address: nil))
    }
}

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
