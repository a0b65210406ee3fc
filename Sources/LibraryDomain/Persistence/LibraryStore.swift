import SQLite

/// Libraries and books in SQLite: reads on a pool of reader connections, writes serialized on the
/// one writer, each write a single transaction.
///
/// Work is given as a closure that runs on a database thread and a completion that receives its
/// result there, so callers on event-loop threads never block.
package final class LibraryStore: Sendable {
    private let pool: DatabasePool
    /// The migrations applied when the store opened (empty when the schema was current).
    package let appliedMigrations: [Migration]

    /// Opens the database at `path` (`:memory:` keeps nothing) and brings its schema up to date.
    /// A write that finds the database locked waits up to `busyTimeoutMilliseconds`, then fails
    /// as unavailable.
    package init(path: String, readerCount: Int = 4, busyTimeoutMilliseconds: Int32 = 5_000) throws {
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

    /// Runs `work` in one write transaction and passes its result to `completion` once committed
    /// (or rolled back, when `work` throws).
    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.write { connection in
            let result = Result {
                try connection.transaction { try work(LibraryWriter(connection: connection)) }
            }
            completion(result.mapError(StoreError.init))
        }
    }

    /// Runs `work` in one write transaction and waits for it (setup and tests).
    package func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryWriter) throws -> T) throws(StoreError)
        -> T
    {
        do {
            return try pool.writeAndWait { connection in
                try connection.transaction { try work(LibraryWriter(connection: connection)) }
            }
        } catch {
            throw StoreError(error)
        }
    }

    /// Finishes queued work, checkpoints and closes the database.
    package func close() {
        pool.close()
    }
}
