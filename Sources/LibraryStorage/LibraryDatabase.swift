import LibraryDomain

/// What the API needs of a store, whichever the engine: reads, batched writes with their change
/// log, the live engine's `LiveStore`, health checks and a clean close.
///
/// `LibraryStore` (SQLite, the embedded default) and `PostgresLibraryStore` (replicas sharing one
/// PostgreSQL database) implement it; handlers see only `LibraryReader` and `LibraryWriter`, which
/// speak both engines' SQL (`SQLSession`).
package protocol LibraryDatabase: LiveStore {
    /// The names of the migrations applied when the store opened (empty when the schema was current).
    var appliedMigrationNames: [String] { get }

    /// Heap bytes the engine's library holds in this process (SQLite's page caches); nil when the
    /// data lives in another process (PostgreSQL).
    var engineHeapBytes: Int? { get }

    /// Runs `work` with a reader for a request on event loop `lane`: on the calling thread when
    /// the engine can read without a network round trip (SQLite), else on a database thread, so
    /// that no event loop ever waits on the network. `completion` gets the result either way.
    func read<T: Sendable>(
        lane: Int?,
        _ work: @escaping @Sendable (LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Runs `work` with a reader on a database thread and passes its result to `completion`.
    func read<T: Sendable>(
        _ work: @escaping @Sendable (LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Runs `work` with a reader and waits for it (start-up and tests).
    func readAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryReader) throws -> T) throws(StoreError) -> T

    /// Runs `work` as one write, in a transaction with its change-log entry, and passes its result
    /// to `completion` once committed (or failed); the commit observer hears of it first.
    func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Runs `work` as one write and waits for its commit (setup and tests).
    func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryWriter) throws -> T) throws(StoreError) -> T

    /// Sets what is told how long each write transaction took and how many writes it committed.
    func observeTransactions(_ observer: @escaping @Sendable (_ duration: Duration, _ writes: Int) -> Void)

    /// Checks that a write could start now; fails when the database cannot be written.
    func checkWritable(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Finishes queued work and closes the database; returns what failed while closing, if anything.
    @discardableResult
    func close() -> StoreError?
}
