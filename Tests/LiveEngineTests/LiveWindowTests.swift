import LibraryDomain
import TestSupport
import Testing

@testable import LiveEngine

/// A window's rows against a reference: after random changes of several books at once (what a
/// library's deletion, or changes folded while the live side is behind, look like), the rows are
/// the first `limit` of the list, and the deltas sent rebuild them for a subscriber.
@Suite struct LiveWindowUnitTests {
    static func book(_ number: Int, title: String, library: String = "L", version: Int = 1) -> BookRecord {
        BookRecord(seq: number) { field in
            switch field {
            case .id: .string("book-\(1000 + number)")
            case .libraryId: .string(library)
            case .title: .string(title)
            case .author: .string("A")
            case .isbn: .null
            case .publishedYear: .null
            case .available: .bool(true)
            case .version: .int(version)
            case .createdAt, .updatedAt: .string("2026-01-01T00:00:00.000Z")
            }
        }
    }

    /// The first `limit` rows of `books` in the window's order after its start, as a reader.
    static func expected(_ books: [String: BookRecord], _ window: BookWindow, readable: Set<String>?) -> [BookRecord] {
        let order = window.query.order!
        let position = { (book: BookRecord) in book.position(in: order) }
        let listed = books.values.filter { window.query.matches($0) && (readable?.contains($0.library) ?? true) }
            .sorted { order.precedes(position($0).key, $0.id, position($1).key, $1.id) }
            .filter { book in
                guard let start = window.start.position else { return true }
                return order.precedes(start.key, start.id, position(book).key, book.id)
            }
        return Array(listed.prefix(window.limit))
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    @LiveActor func rowsFollowChangesOfManyBooksAtOnce(seed: UInt64) {
        var random = SeededGenerator(state: 0xA076_1D64_78BD_642F &* seed)
        let order = ListOrder<BookField>(.title, descending: seed % 2 == 0)
        let start: SortPosition? = seed > 2 ? SortPosition(key: .string("c"), id: "") : nil
        let window = BookWindow(BookQuery(order: order), start: .sorted(start), limit: 4)
        let live = LiveWindow(LiveWindow.Key(window: window, readable: ["L", "M"]))
        func title() -> String {
            String("abcdefg".randomElement(using: &random)!) + "\(Int.random(in: 0..<3, using: &random))"
        }
        var books: [String: BookRecord] = [:]
        var next = 1
        for _ in 0..<12 {
            let book = Self.book(next, title: title())
            books[book.id] = book
            next += 1
        }
        live.beginRead()
        _ = live.endRead(Self.expected(books, window, readable: live.readable), readSeq: 1)
        _ = live.takeTold()
        var seen = Set(live.rows.map(\.book.id))  // its snapshot
        var reads = 0
        for seq in 2..<400 {
            var items: [ChangeItem] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let ids = Array(books.keys).sorted()
                switch Int.random(in: 0..<6, using: &random) {
                case 0:
                    let book = Self.book(next, title: title())
                    next += 1
                    books[book.id] = book
                    items.append(.book(book, fields: Set(BookField.allCases), before: nil, deleted: false))
                case 1 where ids.count > 4:
                    let book = books.removeValue(forKey: ids.randomElement(using: &random)!)!
                    items.append(.book(book, fields: [], before: book.keys, deleted: true))
                case 2:
                    // Moved to a library the window's subscribers cannot read, or back.
                    var book = books[ids.randomElement(using: &random)!]!
                    let before = book.keys
                    book.libraryId = ["L", "M", "N"].randomElement(using: &random)!
                    book.version += 1
                    books[book.id] = book
                    items.append(.book(book, fields: [.libraryId], before: before, deleted: false))
                default:
                    var book = books[ids.randomElement(using: &random)!]!
                    let before = book.keys
                    book.title = title()
                    book.version += 1
                    books[book.id] = book
                    items.append(.book(book, fields: [.title], before: before, deleted: false))
                }
            }
            let change = CommittedChange(seq: seq, items: items)
            let rowsBefore = live.rows.map(\.book.id)
            switch live.apply(change) {
            case .untouched:
                break
            case .changed(let delta):
                for member in delta.added { seen.insert(member.id) }
                for id in delta.removed { #expect(seen.remove(id) != nil, "removed a row it did not have") }
                for member in delta.changed { #expect(seen.contains(member.id), "changed a row it did not have") }
            case .needsRead:
                #expect(
                    live.rows.map(\.book.id) == rowsBefore, "a change that needs a read leaves the rows as they were")
                reads += 1
                live.beginRead()
                #expect(live.endRead(Self.expected(books, window, readable: live.readable), readSeq: seq))
                let told = live.takeTold()
                #expect(Set(told.map(\.book.id)) == seen)
                if let delta = live.delta(from: told) {
                    for member in delta.added { seen.insert(member.id) }
                    for id in delta.removed { seen.remove(id) }
                }
            }
            let wanted = Self.expected(books, window, readable: live.readable)
            #expect(live.rows.map(\.book.id) == wanted.map(\.id), "after change \(seq)")
            #expect(seen == Set(wanted.map(\.id)), "the subscriber's rows after change \(seq)")
            #expect(live.rows.map(\.book.version) == wanted.map(\.version))
        }
        #expect(reads > 0 && reads < 300, "\(reads) reads")
    }
}
