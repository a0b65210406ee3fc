import CSQLite

/// An error of the SQLite layer: a failed SQLite call, or a migration the database cannot take.
///
/// The description names the result code, SQLite's message and the SQL text, never the values that
/// were bound, so it is safe to log but must still never reach an HTTP client.
package struct SQLiteError: Error, CustomStringConvertible, Sendable {
    private enum Kind: Sendable {
        case result(code: Int32)
        case migration
    }

    private let kind: Kind
    /// SQLite's message, or what is wrong with the migrations.
    package let message: String
    /// The SQL being run, when there was one.
    package let sql: String?

    /// An error from an SQLite call, with its extended result code.
    package init(code: Int32, message: String, sql: String? = nil) {
        self.kind = .result(code: code)
        self.message = message
        self.sql = sql
    }

    /// The migrations do not fit the database (changed, unknown or malformed).
    package static func migration(_ message: String) -> SQLiteError {
        SQLiteError(kind: .migration, message: message, sql: nil)
    }

    private init(kind: Kind, message: String, sql: String?) {
        self.kind = kind
        self.message = message
        self.sql = sql
    }

    /// The extended result code, or nil for a migration error.
    package var extendedCode: Int32? {
        if case .result(let code) = kind { return code }
        return nil
    }

    /// The primary result code (`SQLITE_BUSY`, `SQLITE_CONSTRAINT`, ...), or nil for a migration error.
    package var code: Int32? { extendedCode.map { $0 & 0xFF } }

    /// Whether the failure is about the storage itself (busy, locked, read-only, full, I/O), so the
    /// request may succeed later: such errors become 503s.
    package var isUnavailable: Bool {
        guard let code else { return false }
        return [SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_NOMEM]
            .contains(code)
    }

    package var description: String {
        switch kind {
        case .migration:
            return "migration error: \(message)"
        case .result(let code):
            let name = String(cString: sqlite3_errstr(code))
            var text = "SQLite error \(code) (\(name)): \(message)"
            if let sql { text += " in `\(sql)`" }
            return text
        }
    }
}
