/// A PostgreSQL failure: what went wrong, and a message fit for a log.
///
/// Bound parameter values never appear in it, so it can be logged as it is. The kind is private,
/// as SQLite's error keeps its result code: callers ask what they need to decide (`sqlState`,
/// `isConnectionFailure`, `isTransient`), and no failure is dressed up as a SQLSTATE the server
/// never sent.
package struct PGError: Error, Sendable, CustomStringConvertible {
    private enum Kind: Sendable, Equatable {
        /// The server refused a statement with this five-character SQLSTATE.
        case server(String)
        /// No connection, or it broke: the server is down, restarting or out of reach.
        case connection
        /// The store is closing and takes no more work.
        case closing
        /// The schema cannot be brought to this binary's migrations.
        case migration
        /// libpq or the server answered out of step with what was sent.
        case protocolViolation
    }

    private let kind: Kind
    package let message: String

    private init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// A statement the server refused, with its SQLSTATE (`23505` unique violation…).
    package static func server(sqlState: String, message: String) -> PGError { PGError(.server(sqlState), message) }
    /// No connection could be made, or the one in use broke.
    package static func connection(_ message: String) -> PGError { PGError(.connection, message) }
    /// Work given to a store that is closing.
    package static let closing = PGError(.closing, "the store is closing")
    /// Migrations that do not fit the database.
    package static func migration(_ message: String) -> PGError { PGError(.migration, message) }
    /// An answer out of step with what was sent.
    package static func protocolViolation(_ message: String) -> PGError { PGError(.protocolViolation, message) }

    /// The server's SQLSTATE; nil when the failure was not the server's answer to a statement.
    package var sqlState: String? {
        if case .server(let state) = kind { return state }
        return nil
    }

    /// Whether the connection, not the statement, failed: no connection, a broken one, or the
    /// server's class 08 and 57P01–57P03 (admin or crash shutdown, cannot connect now).
    package var isConnectionFailure: Bool {
        switch kind {
        case .connection: true
        case .server(let state): state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
        case .closing, .migration, .protocolViolation: false
        }
    }

    /// Whether trying again later may succeed: the connection failed, the store is closing, or the
    /// server was short of resources (53), hit a serialization failure or deadlock (40), cancelled
    /// the statement (57014, a timeout), is read-only (25006, a standby) or could not take a lock
    /// in time (55P03). What a client should be told as a 503 with `Retry-After`.
    package var isTransient: Bool {
        switch kind {
        case .connection, .closing: true
        case .server(let state):
            isConnectionFailure || state.hasPrefix("53") || state.hasPrefix("40")
                || ["57014", "25006", "55P03"].contains(state)
        case .migration, .protocolViolation: false
        }
    }

    package var description: String {
        switch kind {
        case .server(let state): "PostgreSQL \(state): \(message)"
        case .connection: "PostgreSQL connection: \(message)"
        case .closing, .migration, .protocolViolation: "PostgreSQL: \(message)"
        }
    }
}
