import PostgreSQL
import SQLite

/// A connection of either engine, as the library's queries use it: one SQL text for both.
///
/// The statements are written once, in the SQL both engines speak (`RETURNING`,
/// `IS DISTINCT FROM`, `?` and `?N` parameters); for PostgreSQL the parameters become `$N` and
/// each statement is prepared once per connection (`PGConnection.query`). Used by one thread at
/// a time, like the connection it wraps.
package enum SQLSession {
    case sqlite(Connection)
    case postgres(PGConnection)

    /// Which engine a session speaks, where a statement is written for one.
    package enum Engine {
        case sqlite
        case postgres
    }

    var engine: Engine {
        switch self {
        case .sqlite: .sqlite
        case .postgres: .postgres
        }
    }

    /// The first row `sql` returns, through `transform`; nil when there is none.
    package func first<T>(_ sql: String, _ values: [SQLiteValue] = [], _ transform: (SQLRow) throws -> T) throws
        -> T?
    {
        switch self {
        case .sqlite(let connection):
            return try connection.statement(sql).first(values) { try transform(SQLRow(.sqlite($0))) }
        case .postgres(let connection):
            let result = try connection.query(Self.postgresSQL(sql), values.map(Self.postgresValue))
            return result.count == 0 ? nil : try transform(SQLRow(.postgres(result, 0)))
        }
    }

    /// Every row `sql` returns, through `transform`. `planEachTime` has PostgreSQL plan the
    /// statement with its values every time, never with a plan kept for any values: a search's
    /// index is of use only for the text searched (pg_trgm reads the pattern's trigrams).
    package func map<T>(
        _ sql: String, _ values: [SQLiteValue] = [], planEachTime: Bool = false, _ transform: (SQLRow) throws -> T
    ) throws -> [T] {
        switch self {
        case .sqlite(let connection):
            return try connection.statement(sql).map(values) { try transform(SQLRow(.sqlite($0))) }
        case .postgres(let connection):
            let (sql, values) = (Self.postgresSQL(sql), values.map(Self.postgresValue))
            let result = try planEachTime ? connection.execute(sql, values) : connection.query(sql, values)
            return try (0..<result.count).map { try transform(SQLRow(.postgres(result, $0))) }
        }
    }

    /// Every row `sql` returns, through `transform`, handed to `body` `size` at a time (`body`
    /// may take a batch whole): on SQLite as they are read.
    package func batches<T>(
        _ sql: String,
        _ values: [SQLiteValue],
        of size: Int,
        _ transform: (SQLRow) throws -> T,
        _ body: (inout [T]) -> Void
    ) throws {
        switch self {
        case .sqlite(let connection):
            var batch: [T] = []
            batch.reserveCapacity(size)
            try connection.statement(sql).forEach(values) { row in
                batch.append(try transform(SQLRow(.sqlite(row))))
                guard batch.count == size else { return }
                body(&batch)
                batch = []
                batch.reserveCapacity(size)
            }
            if !batch.isEmpty { body(&batch) }
        case .postgres:
            let rows = try map(sql, values, transform)
            for start in stride(from: 0, to: rows.count, by: size) {
                var batch = Array(rows[start..<min(start + size, rows.count)])
                body(&batch)
            }
        }
    }

    /// Runs `sql` for its effect and returns how many rows it changed.
    @discardableResult
    package func run(_ sql: String, _ values: [SQLiteValue] = []) throws -> Int {
        switch self {
        case .sqlite(let connection):
            return try connection.statement(sql).run(values)
        case .postgres(let connection):
            return try connection.query(Self.postgresSQL(sql), values.map(Self.postgresValue)).affectedRows
        }
    }

    /// Runs statements without parameters (`BEGIN`, `COMMIT`).
    package func execute(_ sql: String) throws {
        switch self {
        case .sqlite(let connection): try connection.execute(sql)
        case .postgres(let connection): try connection.executeScript(sql)
        }
    }

    /// Starts a read-only transaction in which every statement sees the same moment: SQLite's
    /// deferred transaction (WAL), PostgreSQL's repeatable read.
    package func beginReadTransaction() throws {
        switch self {
        case .sqlite(let connection): try connection.execute("BEGIN")
        case .postgres(let connection): try connection.executeScript("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        }
    }

    /// Ends the current transaction without keeping its changes; never fails.
    package func rollback() {
        switch self {
        case .sqlite(let connection): connection.rollback()
        case .postgres(let connection): _ = try? connection.executeScript("ROLLBACK")
        }
    }

    /// `?N` becomes `$N` and each bare `?` the next number: the library's SQL has no `?` in a
    /// literal, so this is the whole translation.
    static func postgresSQL(_ sql: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(sql.utf8.count + 8)
        var next = 0
        let bytes = Array(sql.utf8)
        for (index, byte) in bytes.enumerated() {
            guard byte == UInt8(ascii: "?") else {
                out.append(byte)
                continue
            }
            out.append(UInt8(ascii: "$"))
            if index + 1 < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index + 1]) { continue }
            next += 1
            out.append(contentsOf: String(next).utf8)
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func postgresValue(_ value: SQLiteValue) -> PGValue {
        switch value {
        case .integer(let int): .int(Int(int))
        case .real(let double): .text(String(double))
        case .text(let text): .text(text)
        case .null: .null
        }
    }
}

/// One row of a result, of either engine, read by column index.
package struct SQLRow {
    fileprivate enum Source {
        case sqlite(Row)
        case postgres(PGResult, Int)
        /// Values decoded elsewhere (a change feed notification's log rows).
        case values([SQLiteValue])
    }

    private let source: Source

    fileprivate init(_ source: Source) {
        self.source = source
    }

    /// A row of values that came without a query.
    init(values: [SQLiteValue]) {
        self.init(.values(values))
    }

    /// The first row of a PostgreSQL result, if it has one.
    static func first(of result: PGResult) -> SQLRow? {
        result.count == 0 ? nil : SQLRow(.postgres(result, 0))
    }

    package func isNull(_ index: Int32) -> Bool {
        switch source {
        case .sqlite(let row): row.isNull(index)
        case .postgres(let result, let row): result.isNull(row, Int(index))
        case .values(let values): values[Int(index)] == .null
        }
    }

    package func int(_ index: Int32) -> Int {
        switch source {
        case .sqlite(let row): row.int(index)
        case .postgres(let result, let row): result.int(row, Int(index)) ?? 0
        case .values(let values): if case .integer(let value) = values[Int(index)] { Int(value) } else { 0 }
        }
    }

    package func optionalInt(_ index: Int32) -> Int? { isNull(index) ? nil : int(index) }

    /// SQLite's integer 0 or 1, PostgreSQL's `boolean`.
    package func bool(_ index: Int32) -> Bool {
        switch source {
        case .sqlite(let row): row.bool(index)
        case .postgres(let result, let row): result.bool(row, Int(index)) ?? false
        case .values(let values): values[Int(index)] == .integer(1)
        }
    }

    package func optionalBool(_ index: Int32) -> Bool? { isNull(index) ? nil : bool(index) }

    package func text(_ index: Int32) -> String {
        switch source {
        case .sqlite(let row): row.text(index)
        case .postgres(let result, let row): result.string(row, Int(index)) ?? ""
        case .values(let values): if case .text(let text) = values[Int(index)] { text } else { "" }
        }
    }

    package func optionalText(_ index: Int32) -> String? { isNull(index) ? nil : text(index) }

    /// The text in column `index` when its bytes are `earlier`'s: `earlier` itself, no new string.
    /// Nil when they differ.
    func text(_ index: Int32, ifSameAs earlier: String) -> String? {
        let same =
            switch source {
            case .sqlite(let row): row.text(index, hasBytesOf: earlier)
            case .postgres(let result, let row): result.value(row, Int(index), hasBytesOf: earlier)
            case .values(let values):
                if case .text(let text) = values[Int(index)] { text.utf8.elementsEqual(earlier.utf8) } else { false }
            }
        return same ? earlier : nil
    }
}
