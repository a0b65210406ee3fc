import Dispatch
import LibraryDomain
import PostgreSQL
import SQLite
import Synchronization

/// The replica's writes to PostgreSQL, on one connection of their own, in batches: each batch is
/// one transaction that holds the schema's advisory lock from its first statement to its commit.
///
/// The lock is what makes the change sequence global and commit-ordered: every replica's writes
/// take it, so a change id is read (`max(item)` + 1) only after every smaller one has committed,
/// and no id is ever visible before a smaller one. Batching pays the lock, the id read, the
/// `NOTIFY` and the commit once for every write waiting, the way SQLite's writer groups commits.
/// The lock also caps writes across all replicas at what one connection commits in turn: the
/// single-primary limit docs/operations.md describes (Architecture, Limits).
final class PGWriter: Sendable {
    static let maximumBatch = 64

    private let address: PGAddress
    private let lockKey: Int
    fileprivate let channel: String
    fileprivate let history: Int
    /// This replica's token in its notifications (`FeedPayload`).
    fileprivate let origin: String
    private let queue = DispatchQueue(label: "postgres.writer")
    /// Used on `queue` only.
    private nonisolated(unsafe) var connection: PGConnection?
    private let committer: GroupCommitter
    /// How many batches found the lock held by another replica and waited for it.
    let lockWaits = Atomic(0)

    /// `committed` is told of each batch's committed changes, in id order, before the writes are
    /// answered.
    init(
        address: PGAddress, lockKey: Int, channel: String, origin: String, history: Int,
        committed: @escaping @Sendable ([CommittedChange]) -> Void
    ) {
        self.address = address
        self.lockKey = lockKey
        self.channel = channel
        self.history = history
        self.origin = origin
        let (queue, link) = (queue, Link())
        committer = GroupCommitter(
            maximumBatch: Self.maximumBatch,
            turn: { body in
                queue.async {
                    guard let writer = link.writer else { return }
                    body(PGTransactions(writer: writer))
                }
            },
            committed: committed)
        link.writer = self
    }

    /// How each turn's transactions reach the writer's connection: weakly, since the writer holds
    /// the committer that holds the turn. Set in `init`, before any turn.
    private final class Link: @unchecked Sendable {
        weak var writer: PGWriter?
    }

    func observeTransactions(_ observer: @escaping @Sendable (Duration, Int) -> Void) {
        committer.observeTransactions(observer)
    }

    func write(_ write: any QueuedWrite) {
        committer.submit(write)
    }

    /// Refuses new writes, waits for those queued (each batch schedules the next), then closes
    /// the connection.
    func close() {
        committer.close { queue.sync {} }
        queue.sync { connection = nil }
    }

    fileprivate func open() throws(PGError) -> PGConnection {
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

    /// The whole batch's log rows in one statement, one round trip: each column a parameter holding
    /// an array, which `unnest` turns back into rows.
    fileprivate static let insertLog = """
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

    /// The single-field statement of each write whose caller said it is one (`QueuedWrite.plan`,
    /// `LibraryWriter.singleFieldWrite`: one statement that is the whole write, or changes
    /// nothing), by the write's index.
    fileprivate static func fastPaths(_ writes: some Collection<any QueuedWrite>) -> [(
        index: Int, sql: String, values: [PGValue]
    )] {
        var statements: [(index: Int, sql: String, values: [PGValue])] = []
        let now = Timestamp.now()
        for (index, write) in writes.enumerated() {
            guard let plan = write.plan, let (sql, values) = SQLRows.singleFieldStatement(plan, now: now, on: .postgres)
            else { continue }
            statements.append((index, SQLSession.postgresSQL(sql), values.map(SQLSession.postgresValue)))
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
    /// the lock taken, the last change id read, and the fast-path statements of `writes` run (when
    /// `pipelining`). Returns the last change id and the order to run the writes in: first those
    /// whose statement changed their row, with its result, then the rest, each in the order they
    /// came, run as usual.
    ///
    /// That is a serial order of the batch: a fast path that found its row is its whole write and
    /// ran before anything else the batch does; one that changed nothing runs again, later, and
    /// sees whatever the writes before it did. A batch's writes are concurrent requests (none
    /// has been answered), so any serial order is a correct one.
    ///
    /// The lock is asked for with a 1 ms timeout. When another replica holds it, the pipeline stops
    /// there; the writer then waits for the lock with nothing behind it, and adds to the batch the
    /// writes queued meanwhile (`more`), so that replicas taking turns commit full batches (each
    /// holds what its clients sent while it waited) rather than the few writes that were waiting
    /// when it asked: through three replicas a batch held 2.7 writes instead of 8 through one,
    /// and each paid the batch's statements and commit. A third round trip then runs the fast
    /// paths.
    ///
    /// READ COMMITTED whatever the server's default: `max(item)` must see the commit of whoever
    /// held the lock before, which a snapshot taken earlier would not (so the lock and the read are
    /// two statements). Behind a pooler in transaction mode the settings are local to the
    /// transaction, so no session state is left on a connection the pooler hands to someone else.
    fileprivate func begin(
        _ writes: inout [any QueuedWrite], pipelining: Bool, more: (Int) -> [any QueuedWrite],
        on connection: PGConnection
    ) throws(PGError) -> (latest: Int, ordered: [(any QueuedWrite, prefetched: SQLRow?)]) {
        var head: [(sql: String, values: [PGValue])] = [("BEGIN ISOLATION LEVEL READ COMMITTED", [])]
        if address.statements == .unnamed {
            head.append((Self.transactionSettings, []))
        }
        let lock: [(sql: String, values: [PGValue])] = [
            ("SELECT pg_advisory_xact_lock($1)", [.int(lockKey)]), ("SELECT max(item) FROM change_log", []),
        ]
        var fast = pipelining ? Self.fastPaths(writes) : []
        let results: [PGResult]
        do {
            results = try connection.pipeline(
                head + [(Self.briefLockWait, [])] + lock + [(Self.usualLockWait, [])] + fast.map { ($0.sql, $0.values) }
            )
        } catch  where error.sqlState == "55P03" {
            // Another replica holds the lock: wait for it, then take what queued meanwhile.
            lockWaits.add(1, ordering: .relaxed)
            let locked = try connection.pipeline([("ROLLBACK", [])] + head + lock)
            let extra = more(Self.maximumBatch - writes.count)
            if pipelining {
                fast += Self.fastPaths(extra).map { ($0.index + writes.count, $0.sql, $0.values) }
            }
            writes += extra
            let ran = fast.isEmpty ? [] : try connection.pipeline(fast.map { ($0.sql, $0.values) })
            return Self.order(writes, latest: locked[locked.count - 1], fast: fast, results: ran[...])
        }
        let afterHead = head.count + 1 + lock.count + 1
        return Self.order(writes, latest: results[afterHead - 2], fast: fast, results: results[afterHead...])
    }

    /// The lock's timeout while the batch's statements wait behind it, then the usual one.
    private static let briefLockWait = "SELECT set_config('lock_timeout', '1ms', true)"
    private static let usualLockWait = "SELECT set_config('lock_timeout', '10s', true)"

    /// The last change id (`latest`: the result of `max(item)`), and `writes` in the order to run
    /// them: those whose fast path found its row first, with the row.
    private static func order(
        _ writes: [any QueuedWrite], latest: PGResult, fast: [(index: Int, sql: String, values: [PGValue])],
        results: ArraySlice<PGResult>
    ) -> (latest: Int, ordered: [(any QueuedWrite, prefetched: SQLRow?)]) {
        var rows: [Int: SQLRow] = [:]
        for (statement, result) in zip(fast, results) {
            if let row = SQLRow.first(of: result) { rows[statement.index] = row }
        }
        let found = writes.indices.filter { rows[$0] != nil }.map { (writes[$0], rows[$0]) }
        return (
            (latest.int(0, 0) ?? 0) >> ChangeLog.itemBits,
            found + writes.indices.filter { rows[$0] == nil }.map { (writes[$0], nil) }
        )
    }

    /// Forgets the connection (its transaction may be open and aborted, or it is gone).
    fileprivate func dropConnection() { connection = nil }

    /// The connection, when one is open.
    fileprivate var openConnection: PGConnection? { connection.flatMap { $0.isOpen ? $0 : nil } }

    /// Whether a connection was kept from an earlier turn.
    fileprivate var hasConnection: Bool { connection != nil }
}

/// PostgreSQL's part of group commit, for one turn of the writer: a transaction is two round
/// trips (three after waiting for another replica's lock). The first (`PGWriter.begin`) begins it
/// under the advisory lock, reads the last change id and runs the batch's single-field
/// statements in one pipeline; the second writes the batch's
/// log rows in one statement, prunes, notifies the other replicas (at the commit, never before: a
/// replica that hears it finds the change in the log) and commits.
///
/// A write refused by `LibraryWriter` (a `StoreError`, raised before it writes) leaves the
/// transaction as it was. Any other failure aborts it in SQL: it is rolled back, and the others
/// run again without pipelining; a lost connection fails them all.
private final class PGTransactions: WriteTransactions {
    let writer: PGWriter
    private var latest = 0
    private var first = 0
    private var logRows: [[SQLiteValue]] = []
    private var reconnected = false
    /// The rows the pipelined single-field statements of this transaction's writes returned, by
    /// write: each taken by its write's `updateSingleField` instead of running the statement.
    private var prefetched: [ObjectIdentifier: SQLRow] = [:]

    init(writer: PGWriter) {
        self.writer = writer
    }

    func begin(_ writes: inout [any QueuedWrite], rerun: Bool, more: (Int) -> [any QueuedWrite]) throws
        -> [any QueuedWrite]
    {
        var pipelining = !rerun
        while true {
            do {
                let connection = try writer.open()
                let (latest, ordered) = try writer.begin(
                    &writes, pipelining: pipelining, more: more, on: connection)
                (self.latest, first, logRows) = (latest, latest, [])
                prefetched = [:]
                for case (let write, let row?) in ordered { prefetched[ObjectIdentifier(write)] = row }
                return ordered.map(\.0)
            } catch {
                let stale = writer.hasConnection
                if pipelining, !error.isConnectionFailure, let connection = writer.openConnection {
                    // Maybe a single-field statement failed: every write runs by itself instead.
                    SQLSession.postgres(connection).rollback()
                    pipelining = false
                    continue
                }
                // Never keep a connection whose transaction may be open and aborted.
                writer.dropConnection()
                // A connection found dead at its first statement (the server restarted since):
                // nothing ran, so one new connection may try again at once.
                if error.isConnectionFailure, stale, !reconnected {
                    reconnected = true
                    continue
                }
                throw error
            }
        }
    }

    func run(_ write: any QueuedWrite) -> WriteRun {
        let prefetched = self.prefetched.removeValue(forKey: ObjectIdentifier(write))
        guard let connection = writer.openConnection else {
            return .aborted(PGError.connection("the writer's connection is gone"), fatal: true)
        }
        let session = SQLSession.postgres(connection)
        do {
            let rows = SQLRows(session: session, prefetched: prefetched.map { .some($0) })
            let items: [ChangeItem]
            do {
                items = try write.run(LibraryWriter(rows: rows))
            } catch let error as StoreError where prefetched == nil {
                return .refused(error)
            }
            if prefetched != nil, rows.prefetched != nil {
                throw StoreError(.internal, detail: "a write did not take its pipelined statement's result")
            }
            guard !items.isEmpty else { return .ran(nil) }
            logRows += try ChangeLog.rows(items, as: latest + 1)
            latest += 1
            return .ran(CommittedChange(seq: latest, items: items))
        } catch {
            session.rollback()
            let fatal = (error as? PGError)?.isConnectionFailure ?? !(error is StoreError)
            if fatal { writer.dropConnection() }
            return .aborted(error, fatal: fatal)
        }
    }

    func commit(_ changes: [CommittedChange]) throws {
        guard let connection = writer.openConnection else {
            throw PGError.connection("the writer's connection is gone")
        }
        var end: [(sql: String, values: [PGValue])] = []
        if !logRows.isEmpty {
            end.append(
                (
                    SQLSession.postgresSQL(PGWriter.insertLog),
                    PGWriter.columnArrays(logRows).map(SQLSession.postgresValue)
                ))
            if let prune = ChangeLog.pruneBound(after: first, through: latest, history: writer.history) {
                end.append(("DELETE FROM change_log WHERE item < $1", [.int(prune)]))
            }
        }
        if let last = changes.last {
            // The batch's rows go along when they fit (`FeedPayload`): the other replicas apply
            // them with no read of the log.
            let payload = FeedPayload.encode(last: last.seq, origin: writer.origin, rows: logRows)
            end.append(("SELECT pg_notify($1, $2)", [.text(writer.channel), .text(payload)]))
        }
        end.append(("COMMIT", []))
        do {
            _ = try connection.pipeline(end)
        } catch {
            // Whether a commit whose answer was lost took effect is unknown: the writes are
            // answered as failed (503), and the change feed reads the log whatever happened.
            SQLSession.postgres(connection).rollback()
            if error.isConnectionFailure || !connection.isOpen { writer.dropConnection() }
            throw error
        }
    }
}
