import LibraryDomain
import SQLite
import Testing

@testable import LibraryStorage

/// A row's second timestamp with the bytes of the one before it is read as that one's string, not
/// a new one: a resource never changed has two equal timestamps, and a million books read for a
/// load then make a million strings fewer. Bytes, not `String` equality: two timestamps equal as
/// strings but not as bytes (a composed and a decomposed "é") keep their own bytes.
@Suite struct SharedTimestampTests {
    /// Where a string's bytes are: equal for two strings sharing one storage.
    static func storage(_ text: String) -> UnsafeRawPointer? {
        var text = text
        return text.withUTF8 { UnsafeRawPointer($0.baseAddress) }
    }

    /// A string made at run time, in storage of its own.
    static func fresh(_ text: String) -> String { String(decoding: Array(text.utf8), as: UTF8.self) }

    @Test func `a column with the bytes of an earlier string is that string, on SQLite and in feed rows`() throws {
        let session = SQLSession.sqlite(try Connection(path: ":memory:"))
        let stamp = Self.fresh("2026-11-28T06:00:00.000Z")
        // A SQLite row is read inside `first`: it is the statement's current row, gone after.
        let checked = try session.first("SELECT ?, ?, ?, ?, ?", Self.columns(stamp)) { Self.check($0, stamp) }
        #expect(checked == true)
        #expect(Self.check(SQLRow(values: Self.columns(stamp)), stamp))
        #expect("caf\u{E9}" == "cafe\u{301}")  // equal as strings: the bytes tell them apart
    }

    /// Whether `row` (of `columns(stamp)`) gives `stamp` itself for its first column, and each
    /// earlier string for its own bytes only.
    static func check(_ row: SQLRow, _ stamp: String) -> Bool {
        let results = [
            row.text(0, ifSameAs: stamp).map(storage) == storage(stamp),
            row.text(1, ifSameAs: stamp) == nil,
            row.text(2, ifSameAs: stamp) == nil,
            row.text(3, ifSameAs: "caf\u{E9}") != nil,
            row.text(3, ifSameAs: "cafe\u{301}") == nil,
            row.text(4, ifSameAs: "") != nil,
            row.text(4, ifSameAs: "x") == nil,
        ]
        #expect(results == Array(repeating: true, count: results.count))
        return !results.contains(false)
    }

    /// The same timestamp, a later one, a prefix of it, a composed "é", an empty string.
    static func columns(_ stamp: String) -> [SQLiteValue] {
        [
            .text(stamp), .text("2026-11-28T06:00:00.001Z"), .text("2026-11-28T06:00:00.000"), .text("caf\u{E9}"),
            .text(""),
        ]
    }

    /// A book's row as `RecordTable` reads it, every timestamp `stamp` or `later` by turns, each
    /// in a string of its own.
    static func bookRow(_ stamp: String, _ later: String?) -> SQLRow {
        var timestamps = 0
        let values: [SQLiteValue] = BookField.table.map { descriptor in
            switch descriptor.kind {
            case .timestamp:
                timestamps += 1
                return .text(fresh(timestamps > 1 ? later ?? stamp : stamp))
            case .integer: return .int(1)
            case .boolean: return .int(1)
            case .identifier, .text: return descriptor.nullable ? .null : .text(fresh("x"))
            }
        }
        return SQLRow(values: [.int(7)] + values)
    }

    @Test func `a book never changed reads its two timestamps as one string, a changed one as two`() throws {
        let timestamps = BookField.allCases.filter { $0.descriptor.kind == .timestamp }
        try #require(timestamps.count == 2)
        let stamp = "2026-11-28T06:00:00.000Z"
        let unchanged = Tables.books.record(Self.bookRow(stamp, nil))
        let changed = Tables.books.record(Self.bookRow(stamp, "2026-11-28T07:00:00.000Z"))
        guard case .string(let first) = unchanged[timestamps[0]], case .string(let second) = unchanged[timestamps[1]],
            case .string(let created) = changed[timestamps[0]], case .string(let updated) = changed[timestamps[1]]
        else {
            Issue.record("the timestamps are not strings")
            return
        }
        #expect(first == stamp && second == stamp && Self.storage(first) == Self.storage(second))
        #expect(created == stamp && updated == "2026-11-28T07:00:00.000Z")
    }
}
