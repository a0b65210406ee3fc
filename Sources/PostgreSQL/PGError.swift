/// A PostgreSQL failure: the server's SQLSTATE and primary message, or a connection failure.
///
/// Bound parameter values never appear in it, so it can be logged as it is.
package struct PGError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE (`23505` unique violation, `40001` serialization failure…);
    /// empty when the server sent none (the connection failed).
    package let sqlState: String
    package let message: String

    package init(sqlState: String, message: String) {
        self.sqlState = sqlState
        self.message = message
    }

    /// Whether the connection, not the statement, failed: the server is down, restarting or out
    /// of reach (class 08, 57P01–57P03 admin/crash shutdown and cannot-connect-now, or no SQLSTATE).
    package var isConnectionFailure: Bool {
        sqlState.isEmpty || sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState)
    }

    package var description: String {
        sqlState.isEmpty ? "PostgreSQL: \(message)" : "PostgreSQL \(sqlState): \(message)"
    }
}
