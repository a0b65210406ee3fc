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
        SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::boolean[], ?::text[], ?::text[], ?::text[],
            ?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::boolean[],
            ?::bigint[], ?::text[], ?::text[], ?::text[], ?::boolean[])
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

    /// Sends the fast-path statements of `writes` (`LibraryWriter.patchBook`: one statement that
    /// is the whole write, or changes nothing) in one pipeline, and returns the order to run the
    /// writes in: first those whose statement changed their row, with its result, then the rest,
    /// each in the order they came, run as usual.
    ///
    /// That is a serial order of the batch: a fast path that found its row is its whole write and
    /// ran before anything else the batch does; one that changed nothing runs again, later, and
    /// sees whatever the writes before it did. A batch's writes are concurrent requests (none
    /// has been answered), so any serial order is a correct one.
    private func pipelineFastPaths(_ writes: [any PGWrite], on connection: PGConnection, enabled: Bool) throws(PGError)
        -> [(any PGWrite, prefetched: SQLRow?)]
    {
        guard enabled, writes.count > 1 else { return writes.map { ($0, nil) } }
        var statements: [(index: Int, sql: String, values: [PGValue])] = []
        for (index, write) in writes.enumerated() {
            do {
                _ = try write.run(LibraryWriter(session: .probe))
            } catch FastPathProbe.fastPath(let sql, let values) {
                statements.append(
                    (index, SQLSession.postgresSQL(sql), values.map(SQLSession.postgresValue)))
            } catch {}
        }
        guard statements.count > 1 else { return writes.map { ($0, nil) } }
        let results = try connection.pipeline(statements.map { ($0.sql, $0.values) })
        var rows: [Int: SQLRow] = [:]
        for (statement, result) in zip(statements, results) {
            if let row = SQLRow.first(of: result) { rows[statement.index] = row }
        }
        let found = writes.indices.filter { rows[$0] != nil }.map { (writes[$0], rows[$0]) }
        return found + writes.indices.filter { rows[$0] == nil }.map { (writes[$0], nil) }
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
            do {
                connection = try open()
                // READ COMMITTED whatever the server's default: `max(item)` must see the commit
                // of whoever held the lock before, which a snapshot taken earlier would not.
                // Every replica's writes wait for this transaction's lock while it holds it: if
                // this replica vanishes mid-transaction, the server must notice soon (keepalives)
                // and end the transaction (idle timeout); waiting for another replica's lock, or a
                // row, ends in a 503 after 10 s rather than never. `SET LOCAL`: the settings end
                // with the transaction, so no session state is left on a connection a pooler in
                // transaction mode hands to someone else next.
                let last = try connection.executeScript(
                    """
                    BEGIN ISOLATION LEVEL READ COMMITTED;
                    SET LOCAL idle_in_transaction_session_timeout = '30s'; SET LOCAL lock_timeout = '10s';
                    SET LOCAL tcp_keepalives_idle = 10; SET LOCAL tcp_keepalives_interval = 5;
                    SET LOCAL tcp_keepalives_count = 3;
                    SELECT pg_advisory_xact_lock(\(lockKey)); SELECT max(item) FROM change_log
                    """)
                latest = (last.int(0, 0) ?? 0) >> ChangeLog.itemBits
            } catch {
                // Never keep a connection whose transaction may be open and aborted.
                let stale = self.connection != nil
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
            var ordered: [(any PGWrite, prefetched: SQLRow?)]
            do {
                ordered = try pipelineFastPaths(Array(remaining), on: connection, enabled: pipelining)
            } catch {
                session.rollback()
                if error.isConnectionFailure {
                    self.connection = nil
                    remaining.forEach { $0.finish(nil, error) }
                    return
                }
                pipelining = false
                continue
            }
            remaining = []
            while !ordered.isEmpty {
                let (write, prefetched) = ordered.removeFirst()
                let items: [ChangeItem]
                do {
                    let writer = LibraryWriter(session: session, prefetched: prefetched.map { .some($0) })
                    do {
                        items = try write.run(writer)
                    } catch let error as StoreError where prefetched == nil {
                        done.append((write, .failure(error)))
                        continue
                    }
                    if prefetched != nil, writer.prefetched != nil {
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
            do {
                if !rows.isEmpty {
                    try session.run(Self.insertLog, Self.columnArrays(rows))
                    if let prune = ChangeLog.pruneBound(after: first, through: latest, history: history) {
                        try session.run("DELETE FROM change_log WHERE item < ?", [.int(prune)])
                    }
                }
                // The notification is sent at the commit, never before: a replica that hears it
                // finds the change in the log.
                let notify = changes.last.map { "SELECT pg_notify('\(channel)', '\($0.seq)'); " } ?? ""
                try connection.executeScript(notify + "COMMIT")
            } catch {
                // Whether a commit whose answer was lost took effect is unknown: the writes are
                // answered as failed (503), and the change feed reads the log whatever happened.
                session.rollback()
                if (error as? PGError)?.isConnectionFailure ?? true { self.connection = nil }
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
