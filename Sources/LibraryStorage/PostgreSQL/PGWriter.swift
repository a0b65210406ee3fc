import Dispatch
import LibraryDomain
import PostgreSQL
import SQLite
import Synchronization

/// One write as `PGWriter` runs it: the work, then its change-log entry, finished once committed.
protocol PGWrite: AnyObject, Sendable {
    /// Runs the write in the open transaction; returns the items it changed (empty: none).
    func run(_ writer: LibraryWriter) throws -> [ChangeItem]
    /// Called once: with nil after the commit (`change` set when something changed), or with
    /// why it failed.
    func finish(_ change: CommittedChange?, _ error: (any Error)?)
}

/// The replica's writes to PostgreSQL, on one connection of their own, in batches: each batch is
/// one transaction that holds the schema's advisory lock from its first statement to its commit.
///
/// The lock is what makes the change sequence global and commit-ordered: every replica's writes
/// take it, so a change id is read (`max(item)` + 1) only after every smaller one has committed,
/// and no id is ever visible before a smaller one. Batching pays the lock, the id read, the
/// `NOTIFY` and the commit once for every write waiting, the way SQLite's writer groups commits.
/// The lock also caps writes across all replicas at what one connection commits in turn: the
/// single-primary limit the README describes.
final class PGWriter: Sendable {
    private struct Pending {
        var writes: [any PGWrite] = []
        var scheduled = false
        var closed = false
    }

    static let maximumBatch = 64

    private let address: PGAddress
    private let lockKey: Int
    private let channel: String
    private let history: Int
    private let queue = DispatchQueue(label: "postgres.writer")
    private let pending = Mutex(Pending())
    /// Used on `queue` only.
    private nonisolated(unsafe) var connection: PGConnection?
    /// Told of each batch's committed changes, in id order, before the writes are finished.
    private let committed: @Sendable ([CommittedChange]) -> Void
    /// In a struct: a bare closure read out of a `Mutex` (`withLock { $0 }`) is written back
    /// wrapped in one more pair of reabstraction thunks per read, so each batch would be slower
    /// than the last (swiftlang/swift#91348; `LibraryStore` keeps its observers the same way).
    private struct TransactionObserver: Sendable {
        let notify: @Sendable (Duration, Int) -> Void
    }

    private let transactionObserver = Mutex<TransactionObserver?>(nil)

    init(
        address: PGAddress, lockKey: Int, channel: String, history: Int,
        committed: @escaping @Sendable ([CommittedChange]) -> Void
    ) {
        self.address = address
        self.lockKey = lockKey
        self.channel = channel
        self.history = history
        self.committed = committed
    }

    func observeTransactions(_ observer: @escaping @Sendable (Duration, Int) -> Void) {
        transactionObserver.withLock { $0 = TransactionObserver(notify: observer) }
    }

    func write(_ write: any PGWrite) {
        let schedule = pending.withLock { state -> Bool? in
            guard !state.closed else { return nil }
            state.writes.append(write)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard let schedule else {
            return write.finish(nil, PGError.closing)
        }
        if schedule { queue.async { self.commitPending() } }
    }

    /// Refuses new writes, waits for those queued (each batch schedules the next), then closes
    /// the connection.
    func close() {
        pending.withLock { $0.closed = true }
        while pending.withLock({ $0.scheduled }) { queue.sync {} }
        queue.sync { connection = nil }
    }

    private func open() throws(PGError) -> PGConnection {
        if let connection, connection.isOpen { return connection }
        connection = nil
        let opened = try address.connect()
        if address.statements == .prepared {
            // A session of its own: the settings are made once (behind a transaction pooler
            // they are made in each transaction instead, `begin`).
            try opened.executeScript(Self.sessionSettings)
        }
        connection = opened
        return opened
    }

    private func commitPending() {
        let (batch, more) = pending.withLock { state in
            let batch = state.writes.prefix(Self.maximumBatch)
            state.writes.removeFirst(batch.count)
            state.scheduled = !state.writes.isEmpty
            return (Array(batch), state.scheduled)
        }
        commit(batch)
        if more { queue.async { self.commitPending() } }
    }

    /// The whole batch's log rows in one statement, one round trip: each column a parameter holding
    /// an array, which `unnest` turns back into rows.
    private static let insertLog = """
        INSERT INTO change_log (\(ChangeLog.columns))
        SELECT * FROM unnest(\(ChangeLog.kinds.map { "?::" + $0.postgresArray }.joined(separator: ", ")))
        """

    /// Each column of `rows` as a PostgreSQL array literal (`{"a","b",NULL}`): every element quoted,
    /// with `"` and `\` escaped, so no value can end an element or the array.
    static func columnArrays(_ rows: [[SQLiteValue]]) -> [SQLiteValue] {
        (0..<(rows.first?.count ?? 0)).map { column in
            var literal = "{"
            for (index, row) in rows.enumerated() {
                if index > 0 { literal += "," }
                switch row[column] {
                case .null: literal += "NULL"
                case .integer(let value): literal += String(value)
                case .real(let value): literal += String(value)
                case .text(let text):
                    literal += "\""
                    for character in text.unicodeScalars {
                        if character == "\"" || character == "\\" { literal += "\\" }
                        literal.unicodeScalars.append(character)
                    }
                    literal += "\""
                }
            }
            return .text(literal + "}")
        }
    }

    /// The fast-path statement of each write that has one (`LibraryWriter.patchBook`: one statement
    /// that is the whole write, or changes nothing), by the write's index.
    private static func fastPaths(_ writes: some Collection<any PGWrite>) -> [(
        index: Int, sql: String, values: [PGValue]
    )] {
        var statements: [(index: Int, sql: String, values: [PGValue])] = []
        for (index, write) in writes.enumerated() {
            do {
                _ = try write.run(LibraryWriter(session: .probe))
            } catch FastPathProbe.fastPath(let sql, let values) {
                statements.append((index, SQLSession.postgresSQL(sql), values.map(SQLSession.postgresValue)))
            } catch {}
        }
        return statements
    }

    /// The writer connection's settings. Every replica's writes wait for a batch's lock while it
    /// holds it: if this replica vanishes mid-transaction, the server must notice soon (keepalives)
    /// and end the transaction (idle timeout); waiting for another replica's lock, or a row, ends
    /// in a 503 after 10 s rather than never.
    private static func settings(local: Bool) -> String {
        let settings = [
            ("idle_in_transaction_session_timeout", "30s"), ("lock_timeout", "10s"), ("tcp_keepalives_idle", "10"),
            ("tcp_keepalives_interval", "5"), ("tcp_keepalives_count", "3"),
        ]
        return "SELECT " + settings.map { "set_config('\($0)', '\($1)', \(local))" }.joined(separator: ", ")
    }

    /// Made once per connection, on a session of its own.
    private static let sessionSettings = settings(local: false)
    /// Made in every transaction, behind a pooler in transaction mode.
    private static let transactionSettings = settings(local: true)

    /// The first round trip of a batch, in one pipeline: the transaction begun with its settings,
    /// the lock taken, the last change id read, and the fast-path statements of `writes` run.
    /// Returns the last change id and the order to run the writes in: first those whose statement
    /// changed their row, with its result, then the rest, each in the order they came, run as usual.
    ///
    /// That is a serial order of the batch: a fast path that found its row is its whole write and
    /// ran before anything else the batch does; one that changed nothing runs again, later, and
    /// sees whatever the writes before it did. A batch's writes are concurrent requests (none
    /// has been answered), so any serial order is a correct one.
    ///
    /// READ COMMITTED whatever the server's default: `max(item)` must see the commit of whoever
    /// held the lock before, which a snapshot taken earlier would not (so the lock and the read are
    /// two statements). Behind a pooler in transaction mode the settings are local to the
    /// transaction, so no session state is left on a connection the pooler hands to someone else.
    private func begin(
        _ writes: [any PGWrite], fastPaths fast: [(index: Int, sql: String, values: [PGValue])],
        on connection: PGConnection
    ) throws(PGError) -> (latest: Int, ordered: [(any PGWrite, prefetched: SQLRow?)]) {
        var head: [(sql: String, values: [PGValue])] = [("BEGIN ISOLATION LEVEL READ COMMITTED", [])]
        if address.statements == .unnamed {
            head.append((Self.transactionSettings, []))
        }
        head += [("SELECT pg_advisory_xact_lock($1)", [.int(lockKey)]), ("SELECT max(item) FROM change_log", [])]
        let results = try connection.pipeline(head + fast.map { ($0.sql, $0.values) })
        let latest = (results[head.count - 1].int(0, 0) ?? 0) >> ChangeLog.itemBits
        var rows: [Int: SQLRow] = [:]
        for (statement, result) in zip(fast, results.dropFirst(head.count)) {
            if let row = SQLRow.first(of: result) { rows[statement.index] = row }
        }
        let found = writes.indices.filter { rows[$0] != nil }.map { (writes[$0], rows[$0]) }
        return (latest, found + writes.indices.filter { rows[$0] == nil }.map { (writes[$0], nil) })
    }

    /// Commits `writes` in one transaction, each finished once it has committed.
    ///
    /// No savepoints (a round trip each). A write that fails before changing anything (not
    /// found, invalid, stale `If-Match`: a `StoreError` from `LibraryWriter`, which checks before
    /// it writes) leaves the transaction as it was; its answer, which may depend on the writes
    /// before it, waits for the commit too (a 503 if the commit fails). One that fails in SQL
    /// aborts the transaction: it is rolled back and the others run again in a new one; no write
    /// has been answered before its commit, so nobody has seen the undone attempt.
    private func commit(_ writes: [any PGWrite]) {
        var remaining = writes[...]
        var pipelining = true
        var reconnected = false
        while !remaining.isEmpty {
            let started = ContinuousClock.now
            let connection: PGConnection
            var latest: Int
            var ordered: [(any PGWrite, prefetched: SQLRow?)]
            let fast = pipelining ? Self.fastPaths(remaining) : []
            do {
                connection = try open()
                (latest, ordered) = try begin(Array(remaining), fastPaths: fast, on: connection)
            } catch {
                let stale = self.connection != nil
                if !fast.isEmpty, !error.isConnectionFailure, let connection = self.connection, connection.isOpen {
                    // Maybe a fast-path statement failed: every write runs by itself instead.
                    SQLSession.postgres(connection).rollback()
                    pipelining = false
                    continue
                }
                // Never keep a connection whose transaction may be open and aborted.
                self.connection = nil
                // A connection found dead at its first statement (the server restarted since):
                // nothing ran, so one new connection may try again at once.
                if error.isConnectionFailure, stale, !reconnected {
                    reconnected = true
                    continue
                }
                remaining.forEach { $0.finish(nil, error) }
                return
            }
            let session = SQLSession.postgres(connection)
            let first = latest
            /// Each write run, with its change (nil: it changed nothing) or why it was refused.
            var done: [(any PGWrite, Result<CommittedChange?, StoreError>)] = []
            var rows: [[SQLiteValue]] = []
            var retry = false
            remaining = []
            while !ordered.isEmpty {
                let (write, prefetched) = ordered.removeFirst()
                let items: [ChangeItem]
                do {
                    let writeRows = SQLRows(session: session, prefetched: prefetched.map { .some($0) })
                    let writer = LibraryWriter(rows: writeRows)
                    do {
                        items = try write.run(writer)
                    } catch let error as StoreError where prefetched == nil {
                        done.append((write, .failure(error)))
                        continue
                    }
                    if prefetched != nil, writeRows.prefetched != nil {
                        throw StoreError(.internal, detail: "a write did not take its pipelined statement's result")
                    }
                    var change: CommittedChange?
                    if !items.isEmpty {
                        rows += try ChangeLog.rows(items, as: latest + 1)
                        latest += 1
                        change = CommittedChange(seq: latest, items: items)
                    }
                    done.append((write, .success(change)))
                } catch {
                    // Aborted in SQL, or failed after its statements ran: the whole transaction
                    // is rolled back; this write fails, the others run again.
                    write.finish(nil, error)
                    session.rollback()
                    if (error as? PGError)?.isConnectionFailure ?? !(error is StoreError) {
                        self.connection = nil
                        ordered.forEach { $0.0.finish(nil, error) }
                        done.forEach { $0.0.finish(nil, error) }
                        return
                    }
                    remaining = (done.map(\.0) + ordered.map(\.0))[...]
                    pipelining = false
                    retry = true
                    break
                }
            }
            if retry { continue }
            let changes = done.compactMap { try? $0.1.get() }
            // The second round trip, in one pipeline: the batch's log rows, the pruning, the
            // notification (sent at the commit, never before: a replica that hears it finds the
            // change in the log) and the commit.
            var end: [(sql: String, values: [PGValue])] = []
            if !rows.isEmpty {
                end.append(
                    (SQLSession.postgresSQL(Self.insertLog), Self.columnArrays(rows).map(SQLSession.postgresValue)))
                if let prune = ChangeLog.pruneBound(after: first, through: latest, history: history) {
                    end.append(("DELETE FROM change_log WHERE item < $1", [.int(prune)]))
                }
            }
            if let last = changes.last {
                end.append(("SELECT pg_notify($1, $2)", [.text(channel), .text(String(last.seq))]))
            }
            end.append(("COMMIT", []))
            do {
                _ = try connection.pipeline(end)
            } catch {
                // Whether a commit whose answer was lost took effect is unknown: the writes are
                // answered as failed (503), and the change feed reads the log whatever happened.
                session.rollback()
                if error.isConnectionFailure || !connection.isOpen { self.connection = nil }
                done.forEach { $0.0.finish(nil, error) }
                return
            }
            let succeeded = done.filter { if case .success = $0.1 { true } else { false } }.count
            transactionObserver.withLock { $0 }?.notify(ContinuousClock.now - started, succeeded)
            if !changes.isEmpty { committed(changes) }
            for (write, outcome) in done {
                switch outcome {
                case .success(let change): write.finish(change, nil)
                case .failure(let error): write.finish(nil, error)
                }
            }
        }
    }
}
