import CSQLite
import Synchronization

/// The WAL's size in pages after the latest commit (`Connection.reportWALSize`).
final class WALFrames: Sendable {
    let count = Atomic<Int>(0)
}

/// One SQLite connection with a cache of prepared statements.
///
/// Not Sendable: SQLite connections are opened in multi-thread mode (no internal mutex), so each
/// one must have a single owner at a time; `DatabasePool` gives each its own serial queue.
package final class Connection {
    let handle: OpaquePointer
    private var statements: [String: Statement] = [:]

    /// How a connection is used.
    package enum Role: Sendable {
        /// The one connection that writes: WAL mode is set and migrations run through it.
        case writer
        /// A connection that only reads (`PRAGMA query_only`).
        case reader
        /// A connection that only copies the WAL into the database file (`Checkpointer`).
        case checkpointer
    }

    /// Opens (creating if needed) the database at `path`; `:memory:` is a private in-memory database.
    package init(path: String, role: Role = .writer, busyTimeoutMilliseconds: Int32 = 5_000) throws(SQLiteError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open database"
            sqlite3_close_v2(handle)
            throw SQLiteError(code: code, message: message)
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        do throws(SQLiteError) {
            // Reading the schema here makes a file that is not a database fail at open, not later.
            try execute("PRAGMA foreign_keys = ON; SELECT count(*) FROM sqlite_schema;")
            switch role {
            case .writer:
                // SQLite opens a file it cannot write read-only without a word; every write would
                // then fail until a restart, so refuse now, while the operator is looking.
                if sqlite3_db_readonly(handle, "main") == 1 {
                    throw SQLiteError(code: SQLITE_READONLY, message: "the database file is read-only")
                }
                if path != ":memory:" { try execute("PRAGMA journal_mode = WAL") }
                try execute("PRAGMA synchronous = NORMAL")
                // The writer's page cache lasts across transactions (readers start afresh after
                // every write), so it is the one worth making larger than SQLite's 2 MiB.
                try execute("PRAGMA cache_size = -32768")
            case .reader:
                try execute("PRAGMA query_only = ON")
                // A reader's page cache is emptied by every write (WAL mode), so pages it misses
                // are read again and again: from memory mapped file pages that costs no system
                // call. Only reads go through the mapping; writes still go through the WAL.
                try execute("PRAGMA mmap_size = 1073741824")
            case .checkpointer:
                break
            }
        } catch {
            sqlite3_close_v2(handle)
            throw error
        }
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more SQL statements that return nothing of interest.
    package func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: text, sql: sql)
        }
    }

    /// The prepared statement for `sql`, compiled once per connection and reused.
    package func statement(_ sql: String) throws(SQLiteError) -> Statement {
        if let cached = statements[sql] { return cached }
        let statement = try Statement(connection: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in an immediate transaction: committed when it returns, rolled back when it throws.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try begin()
        do {
            let result = try body()
            try commit()
            return result
        } catch {
            rollback()
            throw error
        }
    }

    /// Runs `body` in a read transaction: every query in it sees the database as it was when the
    /// first one ran (WAL snapshot isolation), whatever commits meanwhile.
    package func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN DEFERRED")
        defer { rollback() }
        return try body()
    }

    /// Whether a transaction is open. SQLite ends one by itself after some errors (a full disk,
    /// an I/O error), so callers that keep going after an error must check.
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Starts an immediate transaction (taking the write lock now, waiting up to the busy timeout).
    package func begin() throws(SQLiteError) { try statement("BEGIN IMMEDIATE").run() }

    /// Commits the open transaction.
    package func commit() throws(SQLiteError) { try statement("COMMIT").run() }

    /// Rolls back the open transaction, if there still is one.
    package func rollback() {
        if isInTransaction { try? execute("ROLLBACK") }
    }

    /// Rows changed by INSERT, UPDATE and DELETE statements since the connection opened.
    package var totalChanges: Int { Int(sqlite3_total_changes64(handle)) }

    /// Stops this connection from checkpointing when its commits grow the WAL (SQLite's default),
    /// and reports the WAL's size in pages to `walFrames` after each commit instead, so that
    /// checkpoints can run elsewhere (`Checkpointer`).
    func reportWALSize(to walFrames: WALFrames) throws(SQLiteError) {
        try execute("PRAGMA wal_autocheckpoint = 0")
        sqlite3_wal_hook(
            handle,
            { context, _, _, frames in
                Unmanaged<WALFrames>.fromOpaque(context!).takeUnretainedValue().count.store(
                    Int(frames), ordering: .relaxed)
                return SQLITE_OK
            },
            Unmanaged.passUnretained(walFrames).toOpaque()
        )
    }

    /// Copies what it can of the WAL into the database file, without waiting for the writer or
    /// readers (`PASSIVE`).
    /// Returns how many pages of the WAL are now in the database file.
    @discardableResult
    func checkpointPassively() throws(SQLiteError) -> Int {
        var walPages: Int32 = 0
        var copiedPages: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &walPages, &copiedPages)
        guard code == SQLITE_OK else { throw error(code: code, sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        return Int(copiedPages)
    }

    /// Copies the WAL into the database file and truncates it; used on a clean shutdown.
    package func checkpoint() throws(SQLiteError) {
        try execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    func error(code: Int32, sql: String?) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        return SQLiteError(
            code: extended != 0 ? extended : code,
            message: String(cString: sqlite3_errmsg(handle)),
            sql: sql
        )
    }
}

/// Bytes SQLite has allocated in this process, every connection's page cache included
/// (`sqlite3_memory_used`).
package func sqliteMemoryUsed() -> Int { Int(sqlite3_memory_used()) }
