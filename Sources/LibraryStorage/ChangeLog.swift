import LibraryDomain
import SQLite

/// The durable change log (`change_log`, migrations 0004 and 0005), written in the same transaction as the
/// change it records, so an event id never names a change that was rolled back.
///
/// A row's id (`item`) is its change's sequence number times 2^24 plus its position in the change:
/// ranges of sequence numbers are ranges of row ids.
enum ChangeLog {
    static let itemBits = 24

    /// The first row id of change `seq`.
    static func firstItem(of seq: Int) -> Int { seq << itemBits }

    /// Records `items` as one change and returns its sequence number: one more than the latest
    /// one, read from the last row (in the write's own transaction, so a rolled-back write gives
    /// its number to the next).
    static func append(_ items: [ChangeItem], history: Int, to session: SQLSession) throws -> Int {
        let seq = try SQLReader(session: session).latestSeq() + 1
        try append(items, as: seq, history: history, to: session)
        return seq
    }

    /// Records `items` as change `seq`, which the caller knows to be the next one.
    static func append(_ items: [ChangeItem], as seq: Int, history: Int, to session: SQLSession) throws {
        for row in try rows(items, as: seq) { try session.run(insert, row) }
        if let prune = pruneBound(after: seq - 1, through: seq, history: history) {
            try session.run("DELETE FROM change_log WHERE item < ?", [.int(prune)])
        }
    }

    /// A column of the log that holds a field's value: the field's own column, shared by a library's
    /// and a book's field of one name (`version`, the timestamps).
    struct FieldColumn {
        let name: String
        let kind: FieldKind
        let library: LibraryField?
        let book: BookField?
    }

    /// The columns of the log that describe the change rather than hold a value: its row id, the
    /// resource and its insertion order (its row's `seq`, migration 0008), then `previousColumns`.
    static let metaColumns: [(name: String, kind: FieldKind)] =
        [
            ("item", .integer), ("entity", .text), ("entity_id", .identifier), ("deleted", .boolean),
            ("fields", .text), ("entity_seq", .integer),
        ]
        + BookField.filterable.map { (previousColumn($0), $0.descriptor.kind) }

    /// The column holding a book's value of a filterable field before the change, kept only when
    /// the change made it differ (so unchanged rows stay lean): `previous_` and the field's column.
    static func previousColumn(_ field: BookField) -> String { "previous_" + field.descriptor.column }

    /// Where the resource's insertion order and the first of the previous values are in a row of
    /// `columns`.
    private static let entitySeq: Int32 = 5
    private static let firstPrevious = 6

    /// Every field's column but `id` (the log's `entity_id`), of both resources, each once. A
    /// library's own id is its row's value of the books' library column (`BookField.library`), so that
    /// a library's replay finds it with its books.
    static let fieldColumns: [FieldColumn] = {
        var columns: [FieldColumn] = []
        for field in LibraryField.allCases where field != .id {
            columns.append(
                FieldColumn(name: field.descriptor.column, kind: field.descriptor.kind, library: field, book: nil))
        }
        for field in BookField.allCases where field != .id {
            let descriptor = field.descriptor
            if let shared = columns.firstIndex(where: { $0.name == descriptor.column }) {
                precondition(columns[shared].kind == descriptor.kind, "\(descriptor.column) holds two kinds")
                columns[shared] = FieldColumn(
                    name: descriptor.column, kind: descriptor.kind, library: columns[shared].library, book: field)
            } else {
                let library: LibraryField? = field == BookField.library ? .id : nil
                columns.append(
                    FieldColumn(name: descriptor.column, kind: descriptor.kind, library: library, book: field))
            }
        }
        return columns
    }()

    /// The log's columns: `metaColumns`, then `fieldColumns`.
    static let columns = (metaColumns.map(\.name) + fieldColumns.map(\.name)).joined(separator: ", ")

    /// The kind of each of `columns`, in order.
    static let kinds = metaColumns.map(\.kind) + fieldColumns.map(\.kind)

    private static let insert = """
        INSERT INTO change_log (\(columns)) VALUES (\(kinds.map { _ in "?" }.joined(separator: ", ")))
        """

    /// The log's rows for `items` as change `seq`: the values of `columns`, in order.
    static func rows(_ items: [ChangeItem], as seq: Int) throws -> [[SQLiteValue]] {
        guard items.count < 1 << itemBits else {
            throw StoreError(.internal, detail: "one write touched more resources than the change log can number")
        }
        return items.enumerated().map { position, item in
            let rowID = SQLiteValue.int(firstItem(of: seq) + position)
            switch item {
            case .library(let library, let fields, let deleted):
                return [rowID, "library", .text(library.id), .bool(deleted), .text(names(fields)), .int(library.seq)]
                    + BookField.filterable.map { _ in .null }
                    + fieldColumns.map { column in column.library.map { SQLiteValue(library[$0]) } ?? .null }
            case .book(let book, let fields, let before, let deleted):
                // Each previous value only when it differs, so that unchanged rows stay lean.
                var row: [SQLiteValue] = [
                    rowID, "book", .text(book.id), .bool(deleted), .text(names(fields)), .int(book.seq),
                ]
                row.reserveCapacity(metaColumns.count + fieldColumns.count)
                for field in BookField.filterable {
                    guard let value = before?[field], !value.sameBytes(book[field]) else {
                        row.append(.null)
                        continue
                    }
                    row.append(SQLiteValue(value))
                }
                for column in fieldColumns { row.append(column.book.map { SQLiteValue(book[$0]) } ?? .null) }
                return row
            }
        }
    }

    /// Where each field's value is in a row of `columns`.
    private static let libraryPositions = positions(\.library)
    private static let bookPositions = positions(\.book)

    /// By field (its `rawValue`), the position of its column in a row of `columns`.
    private static func positions<Field: ResourceField>(_ field: KeyPath<FieldColumn, Field?>) -> [Int32] {
        var positions = [Int32](repeating: -1, count: Field.allCases.count)
        for (index, column) in fieldColumns.enumerated() {
            if let field = column[keyPath: field] { positions[field.rawValue] = Int32(metaColumns.count + index) }
        }
        return positions
    }

    /// A row of `columns`: its change's sequence number and the item it records.
    static func item(_ row: SQLRow) -> (Int, ChangeItem) {
        let seq = row.int(0) >> itemBits
        let fields = row.text(4).split(separator: ",").map(String.init)
        let id = FieldValue.string(row.text(2))
        let order = row.optionalInt(entitySeq) ?? 0  // none in rows logged before migration 0008
        if row.text(1) == "library" {
            let library = LibraryRecord(seq: order) { field in
                field == .id ? id : row.value(libraryPositions[field.rawValue], FieldShape(field.descriptor))
            }
            return (
                seq, .library(library, fields: Set(fields.compactMap { LibraryField(named: $0) }), deleted: row.bool(3))
            )
        }
        let book = BookRecord(seq: order) { field in
            field == .id ? id : row.value(bookPositions[field.rawValue], FieldShape(field.descriptor))
        }
        // Created by this change: nothing before it; else each filtered value as it was.
        let created = fields.contains(BookField.id.name)
        var before: BookKeys?
        if !created {
            var keys = book.keys
            for (position, field) in BookField.filterable.enumerated() {
                let value = row.value(
                    Int32(firstPrevious + position), FieldShape(kind: field.descriptor.kind, nullable: true))
                if value != .null { keys[field] = value }
            }
            before = keys
        }
        return (
            seq,
            .book(book, fields: Set(fields.compactMap { BookField(named: $0) }), before: before, deleted: row.bool(3))
        )
    }

    /// The first row to keep when changes `previous + 1 ... last` were just appended, if one of
    /// them is a multiple of 64 (the log is pruned that often, to the latest `history` changes:
    /// every one after `seq - history`); nil when nothing is pruned now.
    static func pruneBound(after previous: Int, through last: Int, history: Int) -> Int? {
        guard last / 64 > previous / 64 else { return nil }
        return firstItem(of: last / 64 * 64 - history + 1)
    }

    private static func names<Field: ResourceField>(_ fields: Set<Field>) -> String {
        fields.map { $0.name }.sorted().joined(separator: ",")
    }
}

extension SQLReader {
    /// The sequence number of the latest committed change (0 before any).
    package func latestSeq() throws -> Int {
        let last = try session.first("SELECT max(item) FROM change_log") { $0.optionalInt(0) } ?? nil
        return last.map { $0 >> ChangeLog.itemBits } ?? 0
    }

    /// The oldest change still in the log (`latestSeq() + 1` when the log is empty).
    package func oldestKeptSeq() throws -> Int {
        let first = try session.first("SELECT min(item) FROM change_log") { $0.optionalInt(0) } ?? nil
        if let first { return first >> ChangeLog.itemBits }
        return try latestSeq() + 1
    }

    /// Every book of a library, in insertion order.
    package func allBooks(inLibrary id: String) throws -> [BookRecord] {
        try session.map(Self.allBooksQuery, [.text(id)], SQLReader.book)
    }

    /// The same, handed to `body` `size` at a time as they are read (`body` may take the batch).
    package func allBooks(inLibrary id: String, batchesOf size: Int, _ body: (inout [BookRecord]) -> Void) throws {
        let library = FieldValue.string(id)
        try session.batches(
            Self.allBooksQuery, [.text(id)], of: size,
            { Tables.books.record($0, knowing: BookField.library, is: library) },
            body)
    }

    private static let allBooksQuery =
        "SELECT \(Tables.books.columns) FROM books WHERE \(BookField.library.descriptor.column) = ? ORDER BY seq"

    /// The logged changes after `seq` (up to `through`) that concern the book `id`, in order.
    package func changes(ofBook id: String, after seq: Int, through last: Int) throws -> [CommittedChange] {
        try changes(where: "entity_id = ? AND entity = 'book'", [.text(id)], after: seq, through: last)
    }

    /// The logged changes after `seq` (up to `through`) that concern the library `id` or its
    /// membership (books created in, moved into or out of, or deleted from it), in order.
    package func changes(ofLibrary id: String, after seq: Int, through last: Int) throws -> [CommittedChange] {
        try changes(where: Self.inOrLeft, [.text(id), .text(id)], after: seq, through: last)
    }

    /// Whether the log holds the deletion of a book or library at or before `seq`.
    package func hasLoggedDeletion(of target: LiveTarget, through seq: Int) throws -> Bool {
        let entity: String
        let id: String
        switch target {
        case .book(let book): (entity, id) = ("book", book)
        case .library(let library): (entity, id) = ("library", library)
        case .libraries, .books, .window: return false  // a collection is never deleted
        }
        let found = try session.first(
            "SELECT 1 FROM change_log WHERE entity_id = ? AND entity = ? AND deleted AND item < ? LIMIT 1",
            [.text(id), .text(entity), .int(ChangeLog.firstItem(of: seq + 1))]
        ) { _ in true }
        return found ?? false
    }

    /// The logged changes after `seq` (up to `through`) that can concern a collection: every
    /// library change for `.libraries`; for `.books(filter)` the book changes (of the filtered
    /// library and those that left it, when the filter names one), which the live engine then
    /// tests against the filter as it tests live ones. Bounded by the kept history.
    package func changes(ofCollection target: LiveTarget, after seq: Int, through last: Int) throws
        -> [CommittedChange]
    {
        switch target {
        case .books(let filter):
            if let library = filter.library {
                return try changes(
                    where: "(\(Self.inOrLeft)) AND entity = 'book'", [.text(library), .text(library)],
                    after: seq, through: last)
            }
            return try changes(where: "entity = 'book'", [], after: seq, through: last)
        case .libraries:
            return try changes(where: "entity = 'library'", [], after: seq, through: last)
        case .book, .library, .window:
            preconditionFailure(
                "a single resource is replayed by changes(ofBook:) or changes(ofLibrary:), a window not")
        }
    }

    /// The log rows of changes in a library or that took a book out of it (one parameter twice).
    static let inOrLeft =
        "\(BookField.library.descriptor.column) = ? OR \(ChangeLog.previousColumn(BookField.library)) = ?"

    /// The query behind a replay, for `EXPLAIN QUERY PLAN` in tests.
    static func changesQuery(where condition: String) -> String {
        "SELECT \(ChangeLog.columns) FROM change_log WHERE (\(condition)) AND item >= ? AND item < ? ORDER BY item"
    }

    func changes(
        where condition: String,
        _ values: [SQLiteValue],
        after seq: Int,
        through last: Int
    ) throws -> [CommittedChange] {
        let range: [SQLiteValue] = [.int(ChangeLog.firstItem(of: seq + 1)), .int(ChangeLog.firstItem(of: last + 1))]
        return ChangeLog.changes(try session.map(Self.changesQuery(where: condition), values + range, ChangeLog.item))
    }
}

extension ChangeLog {
    /// Log rows' items, in row order, grouped into their changes.
    static func changes(_ rows: [(Int, ChangeItem)]) -> [CommittedChange] {
        var result: [CommittedChange] = []
        for (seq, item) in rows {
            if let last = result.last, last.seq == seq {
                result[result.count - 1] = CommittedChange(seq: seq, items: last.items + [item])
            } else {
                result.append(CommittedChange(seq: seq, items: [item]))
            }
        }
        return result
    }
}
