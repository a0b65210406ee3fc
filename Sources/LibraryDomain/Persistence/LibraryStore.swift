import SQLite
import Synchronization

/// Libraries and books in SQLite: reads on a pool of reader connections, writes serialized on the
/// one writer, each write a single transaction.
///
/// Work is given as a closure that runs on a database thread and a completion that receives its
/// result there, so callers on event-loop threads never block.
package final class LibraryStore: Sendable {
    private let pool: DatabasePool
    /// The migrations applied when the store opened (empty when the schema was current).
    package let appliedMigrations: [Migration]
    /// How many changes the change log keeps at least, for resuming event streams.
    package let history: Int
    /// A closure kept in a struct: a bare closure read out of a `Mutex` (`withLock { $0 }`) is
    /// written back wrapped in reabstraction thunks, one more pair per read, so each write would
    /// get slower and the stack deeper (swiftlang/swift#91348).
    private struct Observer<Value>: Sendable {
        let notify: @Sendable (Value) -> Void
    }

    private let commitObserver = Mutex<Observer<CommittedChange>?>(nil)
    private let durationObserver = Mutex<Observer<Duration>?>(nil)

    /// Opens the database at `path` (`:memory:` keeps nothing) and brings its schema up to date.
    /// A write that finds the database locked waits up to `busyTimeoutMilliseconds`, then fails
    /// as unavailable.
    package init(path: String, readerCount: Int = 4, busyTimeoutMilliseconds: Int32 = 5_000, history: Int = 10_000)
        throws
    {
        self.history = history
        let migrator = try LibraryMigrations.migrator()
        var applied: [Migration] = []
        pool = try DatabasePool(path: path, readerCount: readerCount, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        {
            connection in
            applied = try migrator.migrate(connection)
        }
        appliedMigrations = applied
    }

    /// Runs `work` with a reader and passes its result to `completion`.
    package func read<T: Sendable>(
        _ work: @escaping @Sendable (LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.read { connection in
            completion(Result { try work(LibraryReader(connection: connection)) }.mapError(StoreError.init))
        }
    }

    /// Runs `work` with a reader and waits for it (start-up and tests).
    package func readAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryReader) throws -> T) throws(StoreError)
        -> T
    {
        do {
            return try pool.writeAndWait { connection in try work(LibraryReader(connection: connection)) }
        } catch {
            throw StoreError(error)
        }
    }

    /// Sets what is told of every committed change, in commit order, on the writer's thread.
    package func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        commitObserver.withLock { $0 = Observer(notify: observer) }
    }

    /// Sets what is told how long each write transaction took (for metrics), on the writer's thread.
    package func observeWriteDurations(_ observer: @escaping @Sendable (Duration) -> Void) {
        durationObserver.withLock { $0 = Observer(notify: observer) }
    }

    /// Runs `work` in one write transaction and passes its result to `completion` once committed
    /// (or rolled back, when `work` throws).
    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.write { connection in
            completion(Result { try self.commit(work, on: connection) }.mapError(StoreError.init))
        }
    }

    /// Runs `work` in one write transaction and waits for it (setup and tests).
    package func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryWriter) throws -> T) throws(StoreError)
        -> T
    {
        do {
            return try pool.writeAndWait { connection in try self.commit(work, on: connection) }
        } catch {
            throw StoreError(error)
        }
    }

    /// One transaction: the work, then its entry in the change log. The observer hears of it after
    /// the commit, in commit order (this runs on the single writer queue).
    private func commit<T>(_ work: (LibraryWriter) throws -> T, on connection: Connection) throws -> T {
        let writer = LibraryWriter(connection: connection)
        var change: CommittedChange?
        let started = ContinuousClock.now
        defer {
            if let observer = durationObserver.withLock({ $0 }) { observer.notify(ContinuousClock.now - started) }
        }
        let result = try connection.transaction {
            let result = try work(writer)
            if !writer.items.isEmpty {
                let seq = try ChangeLog.append(writer.items, history: history, to: connection)
                change = CommittedChange(seq: seq, items: writer.items)
            }
            return result
        }
        if let change, let observer = commitObserver.withLock({ $0 }) {
            observer.notify(change)
        }
        return result
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
        pool.close().map(StoreError.init)
    }
}
