import CSQLite
import Glibc

/// A prepared statement, finalized when released.
///
/// Not Sendable: a statement belongs to its connection, which is used by one thread at a time.
package final class Statement {
    let handle: OpaquePointer
    /// The SQL text, for error messages.
    package let sql: String
    private unowned let connection: Connection

    init(connection: Connection, sql: String) throws(SQLiteError) {
        var handle: OpaquePointer?
        let code = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard code == SQLITE_OK, let handle else {
            throw connection.error(code: code, sql: sql)
        }
        self.handle = handle
        self.sql = sql
        self.connection = connection
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// Runs the statement to completion with the given parameters, returning the number of rows changed.
    @discardableResult
    package func run(_ values: [SQLiteValue] = []) throws(SQLiteError) -> Int {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() {}
        return Int(sqlite3_changes(connection.handle))
    }

    /// Runs the statement and calls `body` for every row it returns.
    package func forEach(_ values: [SQLiteValue] = [], _ body: (Row) throws -> Void) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() {
            try body(Row(handle: handle))
        }
    }

    /// Runs the statement and maps each row.
    package func map<T>(_ values: [SQLiteValue] = [], _ transform: (Row) throws -> T) throws -> [T] {
        var result: [T] = []
        try forEach(values) { result.append(try transform($0)) }
        return result
    }

    /// Runs the statement and maps its first row, if any.
    package func first<T>(_ values: [SQLiteValue] = [], _ transform: (Row) throws -> T) throws -> T? {
        try bind(values)
        defer { sqlite3_reset(handle) }
        guard try step() else { return nil }
        return try transform(Row(handle: handle))
    }

    private func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .integer(let int): code = sqlite3_bind_int64(handle, index, int)
            case .real(let double): code = sqlite3_bind_double(handle, index, double)
            case .null: code = sqlite3_bind_null(handle, index)
            case .text(let text):
                code =
                    text.utf8.withContiguousStorageIfAvailable { bytes in
                        sqlite3_bind_text(handle, index, bytes.baseAddress, Int32(bytes.count), csqlite_transient())
                    } ?? sqlite3_bind_text(handle, index, text, -1, csqlite_transient())
            }
            guard code == SQLITE_OK else { throw connection.error(code: code, sql: sql) }
        }
    }

    private func step() throws(SQLiteError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw connection.error(code: code, sql: sql)
        }
    }
}

/// The current row of a statement being stepped. Valid only inside the closure that receives it.
package struct Row {
    let handle: OpaquePointer

    /// The integer in column `index` (0-based).
    package func int(_ index: Int32) -> Int { Int(sqlite3_column_int64(handle, index)) }

    /// The integer in column `index`, or nil for NULL.
    package func optionalInt(_ index: Int32) -> Int? { isNull(index) ? nil : int(index) }

    /// The boolean (non-zero integer) in column `index`.
    package func bool(_ index: Int32) -> Bool { sqlite3_column_int64(handle, index) != 0 }

    /// The text in column `index`; NULL reads as "".
    package func text(_ index: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// The text in column `index`, or nil for NULL.
    package func optionalText(_ index: Int32) -> String? { isNull(index) ? nil : text(index) }

    /// Whether the text in column `index` is `other`'s bytes, without making a string of it.
    package func text(_ index: Int32, hasBytesOf other: String) -> Bool {
        guard let bytes = sqlite3_column_text(handle, index) else { return other.isEmpty }
        let count = Int(sqlite3_column_bytes(handle, index))
        var other = other
        return other.withUTF8 { $0.count == count && (count == 0 || memcmp($0.baseAddress!, bytes, count) == 0) }
    }

    /// Whether column `index` is NULL.
    package func isNull(_ index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }
}
