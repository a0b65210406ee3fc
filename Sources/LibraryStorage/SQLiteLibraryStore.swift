import Dispatch
import LibraryDomain
import SQLite
import Synchronization

/// Libraries and books in SQLite: reads on a pool of reader connections, writes serialized on the
/// one writer, each write a single transaction.
///
/// Writes and long reads are given as a closure that runs on a database thread and a completion
/// that receives its result there, so an event loop never waits for a commit. Short reads of a
/// request run on its event loop's own reader (`read(lane:)`), which no other thread uses.
package final class SQLiteLibraryStore: Sendable {
    let pool: DatabasePool
    /// The migrations applied when the store opened (empty when the schema was current).
    package let appliedMigrations: [Migration]
    package var appliedMigrationNames: [String] { appliedMigrations.map(\.name) }

    package var engineHeapBytes: Int? { sqliteMemoryUsed() }
    /// How many changes the change log keeps at least, for resuming event streams.
    package let history: Int
    /// Connections of their own for large collection snapshots (`PagedSnapshot`).
    let snapshotSlots = SnapshotSlots()
    /// A closure kept in a struct: a bare closure read out of a `Mutex` (`withLock { $0 }`) is
    /// written back wrapped in reabstraction thunks, one more pair per read, so each write would
    /// get slower and the stack deeper (swiftlang/swift#91348).
    private struct Observer<Value>: Sendable {
        let notify: @Sendable (Value) -> Void
    }

    /// Who is told of commits, set after the store opens.
    private final class CommitObserver: Sendable {
        let observer = Mutex<Observer<CommittedChange>?>(nil)
    }

    private let commitObserver = CommitObserver()
    /// Groups the writes into transactions on the writer's queue.
    private let committer: GroupCommitter

    /// Opens the database at `path` (`:memory:` keeps nothing) and brings its schema up to date.
    /// A write that finds the database locked waits up to `busyTimeoutMilliseconds`, then fails
    /// as unavailable.
    /// `lanes` is the number of event loops: each gets a reader of its own for `readNow`.
    package init(path: String, lanes: Int = 2, busyTimeoutMilliseconds: Int32 = 5_000, history: Int = 10_000) throws {
        self.history = history
        let migrator = try LibraryMigrations.migrator()
        var applied: [Migration] = []
        let pool = try DatabasePool(
            path: path,
            laneCount: lanes,
            busyTimeoutMilliseconds: busyTimeoutMilliseconds,
            prepare: { connection in applied = try migrator.migrate(connection) }
        )
        self.pool = pool
        appliedMigrations = applied
        let commitObserver = commitObserver
        committer = GroupCommitter(
            maximumBatch: 32,
            turn: { body in pool.write { body(SQLiteTransactions(connection: $0, history: history)) } },
            committed: { changes in
                guard let observer = commitObserver.observer.withLock({ $0 }) else { return }
                for change in changes { observer.notify(change) }
            })
    }

    /// Runs `work` with a reader and passes its result to `completion`.
    package func read<T: Sendable>(
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.read { connection in
            completion(Result { try work(SQLReader(connection: connection)) }.mapError(StoreError.init))
        }
    }

    /// Runs `work` in one read transaction on a background reader and passes its result to
    /// `completion`: everything `work` reads describes one moment of the database.
    package func readInTransaction<T: Sendable>(
        _ work: @escaping @Sendable (SQLReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.read { connection in
            completion(
                Result { try connection.readTransaction { try work(SQLReader(connection: connection)) } }
                    .mapError(StoreError.init))
        }
    }

    /// Reads on the calling thread: SQLite answers an indexed lookup or a bounded page in
    /// microseconds, less than handing the work to another thread and back would cost.
    package func read<T: Sendable>(
        lane: Int?,
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        completion(readNow(lane: lane, work))
    }

    /// Runs `work` with a reader on the calling thread (waiting, rarely, while another thread uses
    /// that reader) and returns its result; distinct `lane`s get distinct readers
    /// (`DatabasePool.readNow`).
    package func readNow<T>(lane: Int? = nil, _ work: (SQLReader) throws -> T) -> Result<T, StoreError> {
        Result { try pool.readNow(lane: lane) { connection in try work(SQLReader(connection: connection)) } }
            .mapError(StoreError.init)
    }

    /// Runs `work` with a reader and waits for it (start-up and tests).
    package func readAndWait<T: Sendable>(_ work: @escaping @Sendable (any LibraryReader) throws -> T)
        throws(StoreError) -> T
    {
        try readSQLAndWait(work)
    }

    /// Runs `work` with a reader of this engine's SQL and waits for it (start-up and tests).
    package func readSQLAndWait<T: Sendable>(_ work: @escaping @Sendable (SQLReader) throws -> T) throws(StoreError)
        -> T
    {
        do {
            return try pool.writeAndWait { connection in try work(SQLReader(connection: connection)) }
        } catch {
            throw StoreError(error)
        }
    }

    /// Sets what is told of every committed change, in commit order, on the writer's thread.
    package func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        commitObserver.observer.withLock { $0 = Observer(notify: observer) }
    }

    /// Sets what is told how long each write transaction took and how many writes it committed
    /// (for metrics), on the writer's thread.
    package func observeTransactions(_ observer: @escaping @Sendable (_ duration: Duration, _ writes: Int) -> Void) {
        committer.observeTransactions(observer)
    }

    /// Runs `work` as one write and passes its result to `completion` once it has committed (or
    /// failed, when `work` throws). The write may share its transaction with others queued at the
    /// same time (`GroupCommitter`); one that fails leaves the others' changes alone.
    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite?,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        committer.submit(StoreWrite(work: work, plan: plan, completion: completion))
    }

    /// Checks that a write could start now by taking the write lock and letting it go; fails when
    /// the database is locked past the busy timeout or cannot be written.
    package func checkWritable(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        pool.write { connection in
            completion(Result { try connection.execute("BEGIN IMMEDIATE; ROLLBACK") }.mapError(StoreError.init))
        }
    }

    /// Finishes queued work, checkpoints and closes the database; returns why the checkpoint
    /// failed, if it did (the WAL is then replayed at the next open, so nothing is lost).
    @discardableResult
    package func close() -> StoreError? {
        committer.close { _ = try? pool.writeAndWait { _ in } }
        return pool.close().map(StoreError.init)
    }
}

/// SQLite's part of group commit: one `BEGIN … COMMIT` on the writer connection, each write's
/// change logged as it runs (`ChangeLog.append`). A write that throws left the transaction as it
/// was when the connection counted no change since it started; otherwise it is rolled back.
private struct SQLiteTransactions: WriteTransactions {
    let connection: Connection
    let history: Int

    func begin(_ writes: inout [any QueuedWrite], rerun: Bool, more: (Int) -> [any QueuedWrite]) throws
        -> [any QueuedWrite]
    {
        try connection.begin()
        return writes
    }

    func run(_ write: any QueuedWrite) -> WriteRun {
        let changesBefore = connection.totalChanges
        do {
            let items = try write.run(LibraryWriter(session: .sqlite(connection)))
            guard !items.isEmpty else { return .ran(nil) }
            let seq = try ChangeLog.append(items, history: history, to: .sqlite(connection))
            return .ran(CommittedChange(seq: seq, items: items))
        } catch {
            guard connection.totalChanges == changesBefore, connection.isInTransaction else {
                connection.rollback()
                return .aborted(error, fatal: false)
            }
            return .refused(error)
        }
    }

    func commit(_ changes: [CommittedChange]) throws {
        do {
            try connection.commit()
        } catch {
            connection.rollback()
            throw error
        }
    }
}
