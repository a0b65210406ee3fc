import Dispatch
import Foundation
import LibraryDomain
import SQLite
import Synchronization
import Testing

@testable import LibraryStorage

@Suite struct LibraryStoreTests {
    let store = try! SQLiteLibraryStore(path: ":memory:")

    @Test func migrations_ApplyEveryFileFromAnEmptyDatabase() throws {
        let migrator = try LibraryMigrations.migrator()
        #expect(!migrator.migrations.isEmpty)
        #expect(store.appliedMigrations.map(\.name) == migrator.migrations.map(\.name))
        let tables = try store.writeAndWait { writer in
            try writer.connection!.statement("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").map {
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
            [nil, true, false].map {
                BookFilter(
                    [
                        .libraryId: library.map(FieldValue.string), .author: author.map(FieldValue.string),
                        .available: $0.map(FieldValue.bool),
                    ].compactMapValues { $0 })
            }
        }
    }

    @Test(arguments: filterCombinations)
    func bookFilters_EachUseAnIndexThatFitsThem(filter: BookFilter) throws {
        let (sql, values) = SQLReader.booksQuery(BookQuery(filter), after: .seq(10), limit: 50)
        let plan = try store.writeAndWait { writer in
            try writer.connection!.statement("EXPLAIN QUERY PLAN " + sql).map(values) { $0.text(3) }
        }
        let text = plan.joined(separator: " | ")
        #expect(plan.count == 1, "one search, no sort: \(text)")
        #expect(!text.contains("SCAN"), "\(text)")
        #expect(!text.contains("TEMP B-TREE"), "\(text)")
        var expected =
            (filter[.libraryId] == nil ? [] : ["library_id=?"]) + (filter[.author] == nil ? [] : ["author=?"])
        if filter[.available] != nil { expected.append("available=?") }
        if expected.isEmpty {
            #expect(text.contains("INTEGER PRIMARY KEY (rowid>?)"), "\(text)")
        } else {
            #expect(text.contains("(" + (expected + ["seq>?"]).joined(separator: " AND ") + ")"), "\(text)")
        }
    }

    /// The plan of a query, one line per step.
    private func plan(_ query: (String, [SQLiteValue])) throws -> String {
        try store.writeAndWait { writer in
            try writer.connection!.statement("EXPLAIN QUERY PLAN " + query.0).map(query.1) { $0.text(3) }
        }.joined(separator: " | ")
    }

    static let sortedBookOrders = BookField.allCases.filter(\.descriptor.sortable).flatMap {
        [ListOrder($0), ListOrder($0, descending: true)]
    }

    /// A sorted page, of one library or of every book, first or later, is a range of the index of
    /// its sort key (Migrations/0009): no sort, whatever the direction.
    @Test(arguments: sortedBookOrders)
    func sortedBookPages_AreARangeOfTheirKeysIndex(order: ListOrder<BookField>) throws {
        let index =
            switch order.field {
            case .title: "title"
            case .author: "author_id"
            case .publishedYear: "published_year"
            case .createdAt: "created_at"
            default: "updated_at"
            }
        let key: FieldValue = order.field == .publishedYear ? .int(1965) : .string("dune")
        for library in [nil, "3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b"] {
            for start in [ListStart.sorted(nil), .sorted(SortPosition(key: key, id: "b"))] {
                var filter = BookFilter()
                filter.library = library
                let text = try plan(
                    SQLReader.booksQuery(BookQuery(filter, order: order), after: start, limit: 50))
                let name = library == nil ? "books_by_\(index)" : "books_by_library_\(index)"
                #expect(text.contains("USING INDEX \(name) ") || text.hasSuffix("USING INDEX \(name)"), "\(text)")
                #expect(!text.contains("TEMP B-TREE"), "\(text)")
                if library != nil { #expect(text.contains("library_id=?"), "\(text)") }
                if start.position != nil {
                    #expect(
                        text.contains("id)\(order.descending ? "<" : ">")(?,?)"), "a range from the cursor: \(text)")
                }
            }
        }
    }

    @Test(arguments: LibraryField.allCases.filter(\.descriptor.sortable))
    func sortedLibraryPages_AreARangeOfTheirKeysIndex(field: LibraryField) throws {
        let name = ["name": "name", "createdAt": "created_at", "updatedAt": "updated_at", "bookCount": "book_count"][
            field.name]!
        for order in [ListOrder(field), ListOrder(field, descending: true)] {
            let key: FieldValue = field == .bookCount ? .int(3) : .string("x")
            let text = try plan(
                SQLReader.librariesQuery(sortedBy: order, after: .sorted(SortPosition(key: key, id: "l")), limit: 50))
            #expect(text.contains("USING INDEX libraries_by_\(name) "), "\(text)")
            #expect(!text.contains("TEMP B-TREE"), "\(text)")
        }
    }

    /// A searched page (past the first rows of the order) reads the rows of the FTS5 trigram
    /// index, then the books by `seq`, never the books table in any order.
    @Test(arguments: [nil, ListOrder(BookField.title), ListOrder(BookField.publishedYear, descending: true)])
    func searchedPages_ReadTheSearchIndexFirst(order: ListOrder<BookField>?) throws {
        let filter = BookFilter([.libraryId: .string("3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b")])
        let query = BookQuery(filter, search: TextSearch("dune"), order: order)
        let start = order == nil ? ListStart.seq(5) : .sorted(SortPosition(key: .int(3), id: "b"))
        let text = try plan(SQLReader.booksQuery(query, after: start, limit: 50))
        #expect(text.hasPrefix("SCAN books_search VIRTUAL TABLE"), "\(text)")
        #expect(text.contains("SEARCH books USING INTEGER PRIMARY KEY (rowid=?)"), "\(text)")
        #expect(!text.contains("SCAN books "), "\(text)")
    }

    /// Both ways of reading a search give the same pages: a text common among the first rows of
    /// the order (read there), and one that is not (from the search index: rare, or common only
    /// after `SQLReader.rowsReadInOrder` rows).
    @Test func searches_PageAlikeHoweverTheyAreRead() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        let (early, late) = (SQLReader.rowsReadInOrder + 100, 2_100)
        try store.writeAndWait { writer in
            for index in 0..<(early + late) {
                let number = String(index * 7919 % (early + late), radix: 36)
                let title = index < early ? "Aa \(number)" : "Zz \(number) common" + (index % 500 == 0 ? " rare" : "")
                _ = try writer.createBook(BookDraft(libraryId: library.id, title: title, author: "A"))
            }
        }
        let everyBook = try store.readAndWait { try $0.books(BookFilter(), after: 0, limit: 10_000) }.items
        for text in ["COMMON", "rare", "zz "] {
            for order in [nil, ListOrder(BookField.title), ListOrder(BookField.title, descending: true)] {
                var query = BookQuery(BookFilter([.libraryId: .string(library.id)]), order: order)
                query.search = TextSearch(text)
                var seen: [BookRecord] = []
                var start = order == nil ? ListStart.seq(0) : .sorted(nil)
                while true {
                    let page = try store.readAndWait { [start, query] in
                        try $0.books(query, after: start, limit: 50, among: nil)
                    }
                    seen += page.items
                    guard let next = page.next else { break }
                    start = order.map { .sorted(page.items.last!.position(in: $0)) } ?? .seq(next)
                }
                let expected = everyBook.filter { query.matches($0) }.sorted { a, b in
                    guard let order else { return a.seq < b.seq }
                    let (x, y) = (a.position(in: order), b.position(in: order))
                    return order.precedes(x.key, x.id, y.key, y.id)
                }
                #expect(seen.map(\.id) == expected.map(\.id), "q=\(text) sort=\(order?.text ?? "none")")
                #expect(seen.count == (text == "rare" ? 4 : late), "indices 1500, 2000, 2500 and 3000 are rare")
            }
        }
    }

    /// The search index follows every insert, title or author change and delete, a library's
    /// cascade included, as FTS5's own check finds.
    @Test func searchIndex_FollowsEveryWrite() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        let other = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "M")) }
        let dune = try store.writeAndWait {
            try $0.createBook(BookDraft(libraryId: library.id, title: "Dune", author: "Frank Herbert"))
        }
        _ = try store.writeAndWait {
            try $0.createBook(BookDraft(libraryId: other.id, title: "Dune Messiah", author: "Frank Herbert"))
        }
        func found(_ text: String) throws -> [String] {
            try store.readAndWait {
                try $0.books(BookQuery(search: TextSearch(text)), after: .seq(0), limit: 50, among: nil)
            }
            .items.map(\.title)
        }
        #expect(try found("UNE") == ["Dune", "Dune Messiah"])
        #expect(try found("herb") == ["Dune", "Dune Messiah"])
        var patch = BookPatch()
        patch[.title] = .string("Children of Dune")
        patch[.author] = .string("F. H.")
        _ = try store.writeAndWait { [patch] in try $0.patchBook(id: dune.id, if: .none, patch) }
        #expect(try found("herb") == ["Dune Messiah"])
        #expect(try found("children") == ["Children of Dune"])
        _ = try store.writeAndWait { try $0.deleteLibrary(id: other.id, if: .none) }
        #expect(try found("dune") == ["Children of Dune"])
        try store.writeAndWait { writer in
            try writer.connection!.execute("INSERT INTO books_search (books_search) VALUES ('integrity-check')")
        }
    }

    /// What the live engine reads through `LiveStore`: a replay is every change after the id, or
    /// nil once the log no longer holds them all (checked in the same read transaction as the
    /// changes themselves, so a prune in between cannot cut a replay short).
    /// A library's load hands its members out a batch at a time, in order, with the read's id,
    /// and leaves them out of the state; each record's library is the one string of the library.
    /// Each batch says how many members the library has (its `bookCount`), for making room once,
    /// and is the receiver's to take whole.
    @Test func libraryLoad_HandsItsMembersOutInBatchesAsItReads() throws {
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        let other = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "M")) }
        var ids: [String] = []
        for index in 0..<40 {
            let book = try store.writeAndWait {
                try $0.createBook(BookDraft(libraryId: index % 5 == 4 ? other.id : library.id, title: "B\(index)"))
            }
            if index % 5 != 4 { ids.append(book.id) }
        }
        let batches = Mutex<[(seq: Int, expected: Int, books: [BookRecord])]>([])
        let done = DispatchSemaphore(value: 0)
        let state = Mutex<Result<LoadedState, StoreError>?>(nil)
        store.load(
            .library(library.id), batchesOf: 10,
            members: { seq, expected, batch in
                // Taken whole, as the live engine takes it: the reader must not need it back.
                var taken: [BookRecord] = []
                swap(&taken, &batch)
                batches.withLock { $0.append((seq, expected, taken)) }
            }
        ) {
            result in
            state.withLock { $0 = result }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let loaded = try #require(state.withLock { $0 }).get()
        guard case .library(let record, let members)? = loaded.resource else {
            Issue.record("no library loaded")
            return
        }
        #expect(record.id == library.id && members.isEmpty)
        let handed = batches.withLock { $0 }
        #expect(handed.map(\.books.count) == [10, 10, 10, 2])
        #expect(handed.allSatisfy { $0.seq == loaded.seq && $0.expected == ids.count })
        #expect(handed.flatMap(\.books).map(\.id) == ids)
        #expect(handed.flatMap(\.books).allSatisfy { $0.libraryId == library.id && $0.title.hasPrefix("B") })
    }

    @Test func changeLogReplay_IsWholeOrNil() throws {
        let store = try SQLiteLibraryStore(path: ":memory:", history: 10)
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

    /// What PostgreSQL's writer pipelines (a write's plan, `SQLRows.singleFieldStatement`): every
    /// one-field patch but a move is one statement, a filtered text field's (the author's)
    /// returning its value before the change; on SQLite such a field has none.
    @Test func `on PostgreSQL every one-field patch but a move is one statement`() throws {
        for field in BookField.writable {
            var patch = BookPatch()
            patch[field] =
                switch field.descriptor.kind {
                case .boolean: .bool(false)
                case .integer: .int(1969)
                case .identifier: .string("3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b")
                case .text, .timestamp: .string(field == .isbn ? "9780441013593" : "Dune")
                }
            let plan = try #require(LibraryWriter.singleFieldWrite(id: "b", if: .none, patch))
            let returnsBefore = field.descriptor.filterable && field.descriptor.kind != .boolean
            if let (sql, _) = SQLRows.singleFieldStatement(plan, now: "now", on: .postgres) {
                #expect(field != .libraryId, "a move changes two libraries: not one statement")
                #expect(sql.hasSuffix(", before.previous") == returnsBefore, "\(field.name): \(sql)")
            } else {
                #expect(field == .libraryId, "\(field.name) should be one statement")
            }
            let onSQLite = SQLRows.singleFieldStatement(plan, now: "now", on: .sqlite)
            #expect((onSQLite == nil) == (returnsBefore || field == .libraryId), "\(field.name) on SQLite")
        }
    }

    /// `patchBook` answers a one-field patch with a single `UPDATE … RETURNING` and everything else
    /// through `updateBook`; either way the outcome, the stored book and the logged change are those
    /// of `updateBook` with the patch applied.
    @Test(arguments: 0..<12)
    func patch_MatchesUpdateWithThePatchApplied(scenario: Int) throws {
        var patch = BookPatch()
        var precondition = Precondition.none
        var missing = false
        switch scenario {
        case 0: patch[.title] = .string("Dune Messiah")
        case 1: patch[.title] = .string("Dune")  // unchanged: no write, no change logged
        case 2: patch[.isbn] = .null
        case 3: patch[.publishedYear] = .int(1969)
        case 4: patch[.available] = .bool(false)
        case 5: (patch[.title], precondition) = (.string("Children of Dune"), .versions([1]))
        case 6: (patch[.title], precondition) = (.string("Children of Dune"), .versions([7, 8]))  // stale: 412
        case 7: (patch[.title], missing) = (.string("x"), true)  // 404
        case 8: patch[.title] = .string("")  // 422
        case 9: (patch[.title], missing) = (.string(""), true)  // 404 before 422
        case 10: (patch[.title], patch[.author]) = (.string("Dune"), .string("F. Herbert"))  // two fields
        default: (patch[.author], precondition) = (.string("Frank Herbert"), .exists)
        }
        let (chosenPatch, chosenPrecondition) = (patch, precondition)
        func run(_ fast: Bool) throws -> (outcome: String, log: [String]) {
            let (patch, precondition) = (chosenPatch, chosenPrecondition)
            let store = try SQLiteLibraryStore(path: ":memory:")
            let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
            let book = try store.writeAndWait { writer in
                try writer.createBook(
                    BookDraft(
                        libraryId: library.id, title: "Dune", author: "Frank Herbert", isbn: "9780441013593",
                        publishedYear: 1965))
            }
            let id = missing ? Identifier.make() : book.id
            let before = try store.latestCommittedSeq()
            let outcome: String
            do {
                let result = try store.writeAndWait { writer in
                    fast
                        ? try writer.patchBook(id: id, if: precondition, patch)
                        : try writer.updateBook(id: id, if: precondition) { patch.applied(to: $0) }
                }
                outcome =
                    "\(result.title) \(result.author) \(result.isbn ?? "-") \(result.publishedYear ?? 0) "
                    + "\(result.available) v\(result.version)"
            } catch {
                outcome = "\(error.kind)"
            }
            // Library ids differ between the two stores; `updatedAt` is listed by the one-statement
            // path even when the new timestamp equals the old (two writes in one millisecond).
            let shortID = library.id.prefix(1)
            let log = ChangeLogMigrationTests.describe(
                try ChangeLogMigrationTests.replay(store, .book(book.id), after: before)
            ).map {
                $0.replacingOccurrences(of: "\(shortID)→\(shortID)", with: "L→L")
                    .replacingOccurrences(of: ", \"updatedAt\"", with: "")
            }
            return (outcome, log)
        }
        let (fast, slow) = (try run(true), try run(false))
        #expect(fast.outcome == slow.outcome)
        #expect(fast.log == slow.log)
    }

    @Test func move_UpdatesBothLibraries() throws {
        let a = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "A")) }
        let b = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "B")) }
        let book = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: a.id, title: "t")) }
        var move = BookPatch()
        move[.libraryId] = .string(b.id)
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
                try $0.reader.books(BookFilter([.libraryId: .string(library.id)]), after: position, limit: 7)
            }
            seen += page.items.map(\.id)
            guard let next = page.next else { break }
            after = next
        }
        #expect(seen == ids)
    }
}

/// Migration 0004 reshapes the change log; a database written with the old shape keeps its ids,
/// its replays and its pruning exactly.
@Suite struct ChangeLogMigrationTests {
    /// A database at migration 0003, with six changes logged the way the old `ChangeLog.append` did:
    /// libraries A (1) and B (2) created, book X created in A (3), retitled (4), moved to B (5),
    /// deleted (6). Returns its path and the ids of A, B and X.
    static func oldShapeDatabase() throws -> (path: String, a: String, b: String, x: String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("old-shape-\(UUID()).db").path
        let connection = try Connection(path: path)
        let all = try LibraryMigrations.migrator().migrations
        try Migrator(all.filter { $0.version <= 3 }).migrate(connection)
        let (a, b, x) = (
            "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002",
            "x0000000-0000-4000-8000-000000000003"
        )
        let now = "2026-11-20T10:00:00.000Z"
        func change(
            _ seq: Int,
            _ items: [(
                entity: String, id: String, deleted: Bool, fields: String, previous: String?, library: String?,
                version: Int
            )]
        ) throws {
            try connection.statement("INSERT INTO changes (seq, committed_at) VALUES (?, ?)").run([
                .int(seq), .text(now),
            ])
            for item in items {
                let isBook = item.entity == "book"
                try connection.statement(
                    """
                    INSERT INTO change_items (seq, entity, entity_id, deleted, fields, previous_library_id, library_id,
                        name, address, book_count, title, author, isbn, published_year, available, version,
                        created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, NULL, NULL, ?, ?, ?, ?)
                    """
                ).run([
                    .int(seq), .text(item.entity), .text(item.id), .bool(item.deleted), .text(item.fields),
                    .optional(item.previous), .optional(item.library), isBook ? nil : .text("Library"),
                    isBook ? nil : .int(0), isBook ? .text("Title \(seq)") : nil, isBook ? .text("Author") : nil,
                    isBook ? .bool(true) : nil, .int(item.version), .text(now), .text(now),
                ])
            }
        }
        let created = "address,bookCount,createdAt,id,name,updatedAt,version"
        let bookCreated = "author,available,createdAt,id,isbn,libraryId,publishedYear,title,updatedAt,version"
        let count = "bookCount,updatedAt,version"
        try change(1, [("library", a, false, created, nil, nil, 1)])
        try change(2, [("library", b, false, created, nil, nil, 1)])
        try change(3, [("book", x, false, bookCreated, nil, a, 1), ("library", a, false, count, nil, nil, 2)])
        try change(4, [("book", x, false, "title,updatedAt,version", a, a, 2)])
        try change(
            5,
            [
                ("library", a, false, count, nil, nil, 3), ("library", b, false, count, nil, nil, 2),
                ("book", x, false, "libraryId,updatedAt,version", a, b, 3),
            ])
        try change(6, [("book", x, true, "", b, b, 3), ("library", b, false, count, nil, nil, 3)])
        for (id, version) in [(a, 3), (b, 3)] {
            try connection.statement(
                "INSERT INTO libraries (id, name, version, created_at, updated_at) VALUES (?, 'Library', ?, ?, ?)"
            ).run([.text(id), .int(version), .text(now), .text(now)])
        }
        return (path, a, b, x)
    }

    static func replay(_ store: SQLiteLibraryStore, _ target: LiveTarget, after seq: Int) throws -> [CommittedChange]? {
        let result = Mutex<Result<[CommittedChange]?, StoreError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.changes(of: target, after: seq, through: nil) { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        return try #require(result.withLock { $0 }).get()
    }

    /// Each item as `entity:id previous→library deleted fields`, to compare replays as text.
    static func describe(_ changes: [CommittedChange]?) -> [String] {
        (changes ?? []).flatMap { change in
            change.items.map { item in
                switch item {
                case .library(let library, let fields, let deleted):
                    "\(change.seq) library:\(library.id.prefix(1)) v\(library.version) \(deleted) \(fields.map(\.name).sorted())"
                case .book(let book, let fields, let before, let deleted):
                    "\(change.seq) book \(before.map { String($0.library.prefix(1)) } ?? "-")→\(book.libraryId.prefix(1)) \(book.title) \(deleted) \(fields.map(\.name).sorted())"
                }
            }
        }
    }

    /// A record replayed from the log has its row's insertion order, as the writer's has: a book
    /// that joins a watched library through the log takes its place among the members by it.
    @Test func replayedRecords_KeepTheirInsertionOrder() throws {
        let store = try SQLiteLibraryStore(path: ":memory:", history: 100)
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        let other = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "O")) }
        let books = try (0..<3).map { index in
            try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "T\(index)")) }
        }
        _ = try store.writeAndWait { writer in
            try writer.updateBook(id: books[0].id, if: .none) { draft in
                var draft = draft
                draft.libraryId = other.id
                return draft
            }
        }
        var seen = 0
        for change in try #require(try Self.replay(store, .library(library.id), after: 0)) {
            for item in change.items {
                switch item {
                case .library(let record, _, _):
                    #expect(record.seq == library.seq && record.seq > 0)
                case .book(let record, _, _, _):
                    #expect(record.seq == books.first { $0.id == record.id }?.seq && record.seq > 0)
                }
                seen += 1
            }
        }
        #expect(seen == 9, "the library; three creations and the move, each with the library's count")
    }

    @Test func oldShapeLog_ReplaysAsBefore_ThenGoesOnFromItsLatestID() throws {
        let (path, a, b, x) = try Self.oldShapeDatabase()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteLibraryStore(path: path, history: 10)
        #expect(store.appliedMigrations.map(\.version) == [4, 5, 6, 7, 8, 9])
        #expect(try store.latestCommittedSeq() == 6)

        let book = Self.describe(try Self.replay(store, .book(x), after: 0))
        #expect(
            book == [
                "3 book -→a Title 3 false [\"author\", \"available\", \"createdAt\", \"id\", \"isbn\", \"libraryId\", \"publishedYear\", \"title\", \"updatedAt\", \"version\"]",
                "4 book a→a Title 4 false [\"title\", \"updatedAt\", \"version\"]",
                "5 book a→b Title 5 false [\"libraryId\", \"updatedAt\", \"version\"]",
                "6 book b→b Title 6 true []",
            ])
        // A library's replay: its own changes and its members' joins, changes and departures.
        #expect(
            Self.describe(try Self.replay(store, .library(a), after: 0)).map { $0.prefix(12) } == [
                "1 library:a ", "3 book -→a T", "3 library:a ", "4 book a→a T", "5 library:a ", "5 book a→b T",
            ])
        #expect(
            Self.describe(try Self.replay(store, .library(b), after: 4)).map { $0.prefix(12) } == [
                "5 library:b ", "5 book a→b T", "6 book b→b T", "6 library:b ",
            ])

        // New writes number on from the old log, and pruning keeps the latest `history` changes.
        for index in 7...64 {
            let library = try store.writeAndWait { writer in
                try writer.updateLibrary(id: a, if: .none) { draft in
                    var draft = draft
                    draft.name = "A\(index)"
                    return draft
                }
            }
            #expect(library.name == "A\(index)")
        }
        #expect(try store.latestCommittedSeq() == 64)
        #expect(try store.readSQLAndWait { try $0.oldestKeptSeq() } == 55)
        #expect(try Self.replay(store, .library(a), after: 53) == nil, "pruned history is reported, never partial")
        #expect(try Self.replay(store, .library(a), after: 54)?.map(\.seq) == Array(55...64))
        _ = b
    }

    /// The replay queries read one index each, never the whole log.
    @Test(arguments: ["entity_id = ? AND entity = 'book'", "library_id = ? OR previous_library_id = ?"])
    func replayQueries_SearchAnIndex(condition: String) throws {
        let store = try SQLiteLibraryStore(path: ":memory:")
        let sql = SQLReader.changesQuery(where: condition)
        let values: [SQLiteValue] =
            condition.contains("OR") ? [.text("l"), .text("l"), .int(1), .int(2)] : [.text("b"), .int(1), .int(2)]
        let plan = try store.writeAndWait { writer in
            try writer.connection!.statement("EXPLAIN QUERY PLAN " + sql).map(values) { $0.text(3) }
        }
        let text = plan.joined(separator: " | ")
        #expect(!text.contains("SCAN change_log"), "\(text)")
        #expect(text.contains("USING INDEX change_log_by_"), "\(text)")
    }
}
