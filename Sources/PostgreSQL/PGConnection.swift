import CLibPQ
import Glibc

/// A value bound to a statement parameter, sent in PostgreSQL's text format.
package enum PGValue: Sendable, Equatable {
    case text(String)
    case int(Int)
    case bool(Bool)
    case null

    var text: String? {
        switch self {
        case .text(let value): value
        case .int(let value): String(value)
        case .bool(let value): value ? "t" : "f"
        case .null: nil
        }
    }
}

/// How `PGConnection.query` and `pipeline` send their statements.
package enum PGStatements: Sendable {
    /// Prepared under a name the first time a connection sees them, executed by name after: the
    /// server parses and plans each once. Needs a connection of one's own (direct, or a pooler in
    /// session mode).
    case prepared
    /// Parsed and planned with each execution, as PostgreSQL's unnamed statement: no state outlives
    /// a statement, so the connection works through a pooler in transaction mode (pgbouncer's
    /// `pool_mode = transaction`), where consecutive statements may reach different server
    /// connections and a named statement would collide with another client's ("42P05") or be
    /// missing ("26000").
    case unnamed
}

/// Where and how to connect: a libpq URI and how statements are sent on it.
package struct PGAddress: Sendable {
    package let uri: String
    package let statements: PGStatements

    package init(_ uri: String, statements: PGStatements = .prepared) {
        self.uri = uri
        self.statements = statements
    }

    package func connect() throws(PGError) -> PGConnection {
        try PGConnection(uri, statements: statements)
    }
}

/// One libpq connection (`PGconn`), used by one thread at a time and closed in `deinit`.
///
/// Not `Sendable`, like `SQLite.Connection`: whoever owns it confines it to one queue.
/// Statements take their values as parameters (`$1`, `$2`…), never spliced into the SQL.
package final class PGConnection {
    private let handle: OpaquePointer
    private let statements: PGStatements
    /// The name of each statement `query` prepared on this connection, by its SQL.
    private var prepared: [String: String] = [:]
    /// Set when a pipeline broke off: the connection is out of step and must be replaced.
    private var broken = false

    /// Connects with a libpq connection string or URI (`postgres://user@host:port/db`).
    ///
    /// Unless the URI says otherwise, connecting gives up after 3 seconds and TCP keepalives
    /// notice a peer that vanished, so that no caller waits on a dead server for long.
    package init(_ uri: String, statements: PGStatements = .prepared) throws(PGError) {
        self.statements = statements
        let keywords = ["connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count", "dbname"]
        let values = ["3", "10", "5", "3", uri]
        // The URI is expanded in place of `dbname` and overrides the defaults before it.
        let connected: OpaquePointer? = withCStrings(keywords.map(Optional.some) + [nil]) { keywordPointers in
            withCStrings(values.map(Optional.some) + [nil]) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let handle = connected else {
            throw PGError.connection("out of memory while connecting")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.message(of: handle)
            PQfinish(handle)
            throw PGError.connection(message)
        }
        // Notices (`relation … already exists, skipping`) are the server's remarks, not errors:
        // libpq would print them on stderr, where the server's log lines go.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        self.handle = handle
    }

    deinit { PQfinish(handle) }

    /// Whether the connection is still usable (libpq noticed no failure on it, nor did a pipeline).
    package var isOpen: Bool { !broken && PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement with `values` bound to `$1`, `$2`…, and returns its rows (if any).
    @discardableResult
    package func execute(_ sql: String, _ values: [PGValue] = []) throws(PGError) -> PGResult {
        let texts = values.map(\.text)
        // libpq copies the parameters before returning: the C strings need to live only this long.
        return try checked(
            withCStrings(texts) { pointers in
                PQexecParams(handle, sql, Int32(values.count), nil, pointers, nil, nil, 0)
            })
    }

    /// The rows of a statement's result, or its error (the result then freed).
    private func checked(_ result: OpaquePointer?) throws(PGError) -> PGResult {
        guard let result else { throw PGError.connection(Self.message(of: handle)) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PGResult(result)
        default:
            let error = Self.error(of: result, on: handle)
            PQclear(result)
            throw error
        }
    }

    /// Runs one statement like `execute`; with `.prepared` statements, prepared the first time this
    /// connection sees its SQL and executed by name after that: the server parses and plans it once.
    @discardableResult
    package func query(_ sql: String, _ values: [PGValue] = []) throws(PGError) -> PGResult {
        guard statements == .prepared else { return try execute(sql, values) }
        let name = try statementName(sql)
        let texts = values.map(\.text)
        return try checked(
            withCStrings(texts) { pointers in
                PQexecPrepared(handle, name, Int32(values.count), pointers, nil, nil, 0)
            })
    }

    /// The name `sql` is prepared under on this connection, preparing it the first time.
    private func statementName(_ sql: String) throws(PGError) -> String {
        if let known = prepared[sql] { return known }
        let name = "s\(prepared.count)"
        guard let result = PQprepare(handle, name, sql, 0, nil) else {
            throw PGError.connection(Self.message(of: handle))
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            let error = Self.error(of: result, on: handle)
            // This connection's first name taken already: the session is someone else's too.
            guard error.sqlState == "42P05" else { throw error }
            throw PGError.server(
                sqlState: "42P05",
                message: error.message
                    + " (a pooler in transaction mode shares server sessions between clients: named statements"
                    + " need a direct connection or session pooling; connect with unnamed statements instead)")
        }
        prepared[sql] = name
        return name
    }

    /// Runs `statements` in libpq's pipeline mode: all of them sent at once, their results read
    /// after, so that they cost one round trip instead of one each. They run in order, as if
    /// sent one by one; when one fails the rest are skipped and this throws its error (inside a
    /// transaction, which is then aborted).
    package func pipeline(_ statements: [(sql: String, values: [PGValue])]) throws(PGError) -> [PGResult] {
        let names: [String?] =
            switch self.statements {
            case .prepared: try statements.map { statement throws(PGError) in try statementName(statement.sql) }
            case .unnamed: Array(repeating: nil, count: statements.count)
            }
        guard PQenterPipelineMode(handle) == 1 else { throw PGError.protocolViolation(Self.message(of: handle)) }
        var results: [PGResult] = []
        var failure: PGError?
        for (name, statement) in zip(names, statements) {
            let sent = withCStrings(statement.values.map(\.text)) { pointers in
                if let name {
                    PQsendQueryPrepared(handle, name, Int32(statement.values.count), pointers, nil, nil, 0)
                } else {
                    PQsendQueryParams(handle, statement.sql, Int32(statement.values.count), nil, pointers, nil, nil, 0)
                }
            }
            if sent != 1 {
                failure = PGError.connection(Self.message(of: handle))
                break
            }
        }
        if failure == nil, PQpipelineSync(handle) != 1 {
            failure = PGError.connection(Self.message(of: handle))
        }
        if let failure {
            // A pipeline cut short cannot be read back in step: the connection is given up.
            broken = true
            throw failure
        }
        // Each statement's result, then a null; after the last, the sync's result. Nulls in a
        // row beyond one per statement mean the connection is gone.
        var nulls = 0
        while true {
            guard let result = PQgetResult(handle) else {
                nulls += 1
                if PQstatus(handle) != CONNECTION_OK || nulls > statements.count + 1 {
                    broken = true
                    failure = failure ?? PGError.connection(Self.message(of: handle))
                    break
                }
                continue
            }
            nulls = 0
            let status = PQresultStatus(result)
            if status == PGRES_PIPELINE_SYNC {
                PQclear(result)
                break
            }
            switch status {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                results.append(PGResult(result))
            case PGRES_PIPELINE_ABORTED:
                PQclear(result)
            default:
                failure = failure ?? Self.error(of: result, on: handle)
                PQclear(result)
            }
        }
        _ = PQexitPipelineMode(handle)
        if let failure { throw failure }
        guard results.count == statements.count else {
            throw PGError.protocolViolation("a pipeline returned \(results.count) results for \(statements.count)")
        }
        return results
    }

    /// The connection's socket, for `poll` while waiting for notifications.
    package var socket: Int32 { PQsocket(handle) }

    /// Reads whatever the server sent (notifications among it) without waiting; false when the
    /// connection failed.
    package func consumeInput() -> Bool { PQconsumeInput(handle) == 1 }

    /// The notifications received so far (`LISTEN`), oldest first: channel and payload.
    package func notifications() -> [(channel: String, payload: String)] {
        var received: [(String, String)] = []
        while let notice = PQnotifies(handle) {
            received.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            PQfreemem(notice)
        }
        return received
    }

    /// Runs a script of one or more statements, with no parameters (a migration file, or
    /// several statements sent in one round trip), and returns the last statement's rows.
    @discardableResult
    package func executeScript(_ sql: String) throws(PGError) -> PGResult {
        try checked(PQexec(handle, sql))
    }

    private static func error(of result: OpaquePointer, on handle: OpaquePointer) -> PGError {
        let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        // An error result without a SQLSTATE is libpq's own: the connection failed under it.
        guard let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map({ String(cString: $0) }) else {
            return .connection(primary ?? message(of: handle))
        }
        return .server(sqlState: sqlState, message: primary ?? message(of: handle))
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    @discardableResult
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    private static func message(of handle: OpaquePointer) -> String {
        let text = PQerrorMessage(handle).map { String(cString: $0) } ?? ""
        let trimmed = text.trimmingSuffix { $0 == "\n" || $0 == " " }
        return trimmed.isEmpty ? "the connection failed" : trimmed
    }
}

/// Calls `body` with C strings for `texts` (nil stays a null pointer: SQL NULL, or the end of a
/// keyword list).
private func withCStrings<R>(_ texts: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let storage: [UnsafeMutablePointer<CChar>?] = texts.map { $0.map { strdup($0) } ?? nil }
    defer { storage.forEach { free($0) } }
    return body(storage.map { $0.map { UnsafePointer($0) } })
}

extension String {
    fileprivate func trimmingSuffix(while drop: (Character) -> Bool) -> String {
        var text = Substring(self)
        while let last = text.last, drop(last) { text = text.dropLast() }
        return String(text)
    }
}

/// The rows of one statement (`PGresult`), read in text format and freed in `deinit`.
package final class PGResult {
    private let handle: OpaquePointer

    init(_ handle: OpaquePointer) {
        self.handle = handle
    }

    deinit { PQclear(handle) }

    package var count: Int { Int(PQntuples(handle)) }
    /// For INSERT, UPDATE, DELETE: how many rows the statement touched.
    package var affectedRows: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }

    package func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    package func string(_ row: Int, _ column: Int) -> String? {
        isNull(row, column) ? nil : String(cString: PQgetvalue(handle, Int32(row), Int32(column)))
    }

    /// Whether the (non-NULL) value at `row`, `column` is `other`'s bytes, without making a string of it.
    package func value(_ row: Int, _ column: Int, hasBytesOf other: String) -> Bool {
        guard !isNull(row, column), let bytes = PQgetvalue(handle, Int32(row), Int32(column)) else { return false }
        let count = Int(PQgetlength(handle, Int32(row), Int32(column)))
        var other = other
        return other.withUTF8 { $0.count == count && (count == 0 || memcmp($0.baseAddress!, bytes, count) == 0) }
    }

    package func int(_ row: Int, _ column: Int) -> Int? { string(row, column).flatMap { Int($0) } }

    /// A `boolean` column (`t` or `f` in text format).
    package func bool(_ row: Int, _ column: Int) -> Bool? { string(row, column).map { $0 == "t" } }
}
