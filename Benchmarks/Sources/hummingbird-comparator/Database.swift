import CSQLite
import Foundation
import Synchronization

/// A SQLite error, with the message SQLite gave.
struct DatabaseError: Error, CustomStringConvertible {
    let description: String
}

/// A value bound to a statement parameter.
enum SQLValue {
    case text(String)
    case int(Int)
    case null
}

/// One SQLite connection with its prepared statements, set up as library-server sets up its own:
/// WAL, `synchronous = NORMAL`, foreign keys on, a 5 s busy timeout.
final class Connection {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String) throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
            let handle
        else {
            sqlite3_close_v2(handle)
            throw DatabaseError(description: "cannot open \(path)")
        }
        self.handle = handle
        sqlite3_busy_timeout(handle, 5_000)
        try execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw error() }
    }

    /// Runs `sql` (prepared once, then reused) with `values` and maps each row with `row`.
    func query<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) -> T) throws -> [T] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, csqlite_transient())
            case .int(let number): sqlite3_bind_int64(statement, position, Int64(number))
            case .null: sqlite3_bind_null(statement, position)
            }
        }
        var rows: [T] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: rows.append(row(Row(statement: statement)))
            case SQLITE_DONE: return rows
            default: throw error()
            }
        }
    }

    /// Runs `body` in an immediate transaction.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
            let statement
        else { throw error() }
        statements[sql] = statement
        return statement
    }

    private func error() -> DatabaseError {
        DatabaseError(description: String(cString: sqlite3_errmsg(handle)))
    }
}

/// The current row of a statement.
struct Row {
    let statement: OpaquePointer

    func text(_ column: Int32) -> String { String(cString: sqlite3_column_text(statement, column)) }
    func optionalText(_ column: Int32) -> String? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : text(column)
    }
    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
    func optionalInt(_ column: Int32) -> Int? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : int(column)
    }
}

/// The writer connection and a few readers, each behind its own lock.
///
/// SQLite calls on a local file take microseconds, so handlers call them directly; WAL lets the
/// readers run while the writer commits.
final class Database: Sendable {
    private let writer: Locked
    private let readers: [Locked]
    private let next = Atomic<Int>(0)

    /// A connection and its lock.
    private final class Locked: @unchecked Sendable {  // `connection` is used only under `lock`
        private let lock = NSLock()
        private let connection: Connection
        init(_ connection: Connection) { self.connection = connection }

        func with<T>(_ body: (Connection) throws -> T) rethrows -> T {
            lock.lock()
            defer { lock.unlock() }
            return try body(connection)
        }
    }

    init(path: String, readerCount: Int) throws {
        writer = Locked(try Connection(path: path))
        readers = try (0..<readerCount).map { _ in Locked(try Connection(path: path)) }
    }

    func read<T: Sendable>(_ body: (Connection) throws -> T) throws -> T {
        let index = next.add(1, ordering: .relaxed).newValue % readers.count
        return try readers[index].with { connection in try body(connection) }
    }

    func write<T: Sendable>(_ body: (Connection) throws -> T) throws -> T {
        try writer.with { connection in try connection.transaction { try body(connection) } }
    }

    /// Runs `body` on the writer without a transaction of its own: for one statement, which SQLite
    /// commits by itself (autocommit), as the plain handlers use it.
    func writeStatement<T: Sendable>(_ body: (Connection) throws -> T) throws -> T {
        try writer.with { connection in try body(connection) }
    }
}
