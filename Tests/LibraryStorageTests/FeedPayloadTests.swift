import Foundation
import LibraryDomain
import SQLite
import Testing

@testable import LibraryStorage

/// The rows a replica's notification carries to the others (`FeedPayload`): read back exactly as
/// the log holds them, whatever the text, or not carried at all.
@Suite struct FeedPayloadTests {
    /// Every change the writes below log, as the log reads them back.
    static func loggedChanges() throws -> [CommittedChange] {
        let store = try SQLiteLibraryStore(path: ":memory:")
        let awkward = [#"a "quoted" {b,c} \ d"#, "NULL", "tab\tnew\nline\u{1}", "é 📚 \u{7F}", "null", "-1", "[1,2]"]
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: awkward[0])) }
        let other = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Other")) }
        var books: [BookRecord] = []
        for title in awkward {
            books.append(
                try store.writeAndWait {
                    try $0.createBook(BookDraft(libraryId: library.id, title: title, author: title))
                }
            )
        }
        let (moved, deleted) = (books[0].id, books[1].id)
        _ = try store.writeAndWait { writer in
            try writer.updateBook(id: moved, if: .none) { draft in
                var draft = draft
                draft.author = "Someone else"
                draft.libraryId = other.id
                return draft
            }
        }
        _ = try store.writeAndWait { try $0.deleteBook(id: deleted, if: .none) }
        _ = try store.writeAndWait { try $0.deleteLibrary(id: library.id, if: .none) }
        return try store.readSQLAndWait { try $0.changes(where: "TRUE", [], after: 0, through: 1_000) }
    }

    @Test func `a batch's rows come back as the log holds them, whatever their text`() throws {
        let changes = try Self.loggedChanges()
        #expect(changes.count == 12)
        let rows = try changes.flatMap { try ChangeLog.rows($0.items, as: $0.seq) }
        let payload = FeedPayload.encode(last: changes.last!.seq, origin: "r1", rows: rows, limit: 1 << 20)
        #expect(FeedPayload.last(payload) == changes.last!.seq && FeedPayload.origin(payload) == "r1")
        let decoded = try #require(FeedPayload.changes(payload))
        #expect(decoded.map(\.seq) == changes.map(\.seq))
        #expect(try decoded.flatMap { try ChangeLog.rows($0.items, as: $0.seq) } == rows)
    }

    @Test func `rows that do not fit are left out, and only the last id goes`() throws {
        let changes = try Self.loggedChanges()
        let rows = try changes.flatMap { try ChangeLog.rows($0.items, as: $0.seq) }
        let payload = FeedPayload.encode(last: 42, origin: "r2", rows: rows, limit: 200)
        #expect(payload == "42 r2")
        #expect(FeedPayload.last(payload) == 42 && FeedPayload.origin(payload) == "r2")
        #expect(FeedPayload.changes(payload) == nil)
        #expect(FeedPayload.encode(last: 7, origin: "r3", rows: []) == "7 r3")
    }

    @Test(arguments: [
        "", "x", "12 ", "12 r", "12 r ", "12 [[null]]", "12 r [", "12 r [[1,2]]", "12 r [[\"unterminated]]", "12 r []",
        "12 r [[null]] trailing",
    ])
    func `a payload that is not ours is not taken for rows`(payload: String) {
        #expect(FeedPayload.changes(payload) == nil)
    }
}
