import Digest
import Dispatch
import LibraryDomain
import PostgreSQL
import SQLite
import Synchronization

/// Libraries and books in PostgreSQL, for replicas sharing one database: reads on a pool of
/// worker connections, writes batched on one connection under the schema's advisory lock, and a
/// change feed that hears every replica's commits (`ChangeFeed`).
///
/// Every call returns at once and completes on a database thread: no event loop waits on the
/// network. Selected by a `postgres://` or `postgresql://` URI; the tables live in the URI's
/// first schema (`options=-csearch_path=…` picks another), so one cluster can hold several
/// independent deployments (the tests use one schema each).
///
/// With a `listenURI`, `uri` may lead through a pooler in transaction mode (pgbouncer's
/// `pool_mode = transaction`): reads, writes and snapshots then keep no session state there
/// (unnamed statements; settings and locks last one transaction), while the migrations' session
/// lock and the change feed's `LISTEN`, which need a session of their own, use `listenURI`, a
/// direct connection to the same database.
package final class PostgresLibraryStore: LibraryDatabase, SnapshotSource {
    package let history: Int
    package let appliedMigrationNames: [String]

    package var engineHeapBytes: Int? { nil }
    let snapshotSlots = SnapshotSlots()
    /// Where reads, writes and snapshots connect.
    private let address: PGAddress
    private let readers: PGWorkers
    private let writer: PGWriter
    private let feed: ChangeFeed

    /// Whether `database` names a PostgreSQL database rather than a SQLite file.
    package static func isPostgres(_ database: String) -> Bool {
        database.hasPrefix("postgres://") || database.hasPrefix("postgresql://")
    }

    /// Connects, brings the schema up to date (under a lock: replicas starting together take
    /// turns) and starts listening for changes. `onGap` is told when the change log no longer
    /// continues what this replica applied (`FeedGap`: pruned past it, or rewound behind it).
    /// `ownCommits` other than `.handedOver` makes the live engine hear even this replica's commits
    /// as it hears the other replicas' (tests).
    package init(
        uri: String,
        listenURI: String? = nil,
        readers: Int = 4,
        history: Int = 10_000,
        ownCommits: OwnCommits = .handedOver,
        onGap: @escaping @Sendable (FeedGap) -> Void = { _ in }
    ) throws(StoreError) {
        let address = PGAddress(uri, statements: listenURI == nil ? .prepared : .unnamed)
        let direct = PGAddress(listenURI ?? uri)
        self.address = address
        self.history = history
        do {
            let connection = try direct.connect()
            let migrations = try EmbeddedPostgresMigrations.files.map { file in
                guard let version = Int(file.name.prefix { $0.isNumber }) else {
                    throw StoreError(.internal, detail: "migration \(file.name) has no number")
                }
                return PGMigration(
                    version: version, name: file.name, sql: file.contents,
                    checksum: SHA256.hex(of: Array(file.contents.utf8)))
            }
            appliedMigrationNames = try PGMigrator(migrations).migrate(connection).map(\.name)
            let scope = try connection.execute("SELECT current_database() || '.' || current_schema()").string(0, 0)
            let key = Self.fnv1a(scope ?? "")
            let channel = "library_changes_\(String(UInt64(bitPattern: Int64(key)), radix: 16))"
            let latest = try SQLReader(session: .postgres(connection)).latestSeq()
            let feed = ChangeFeed(
                address: direct, channel: channel, applied: latest, ownCommits: ownCommits, onGap: onGap)
            self.feed = feed
            writer = PGWriter(address: address, lockKey: key, channel: channel, origin: feed.origin, history: history) {
                feed.committed($0)
            }
            self.readers = PGWorkers(address: address, count: readers, label: "postgres.reader")
        } catch {
            throw StoreError(error)
        }
    }

    /// A 64-bit FNV-1a hash: the advisory lock key and channel name of one schema.
    private static func fnv1a(_ text: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return Int(Int64(bitPattern: hash))
    }

    package func read<T: Sendable>(
        lane: Int?,
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        read(work, completion: completion)
    }

    package func read<T: Sendable>(
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        readSQL(work, completion: completion)
    }

    /// Runs `work` with a reader of this engine's SQL on a database thread.
    func readSQL<T: Sendable>(
        _ work: @escaping @Sendable (SQLReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        readers.submit { connection in
            completion(
                Result { try work(SQLReader(session: .postgres(connection.get()))) }.mapError(StoreError.init))
        }
    }

    func readInTransaction<T: Sendable>(
        _ work: @escaping @Sendable (SQLReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        readers.submit { connection in
            completion(
                Result {
                    let connection = try connection.get()
                    return try connection.readTransaction { try work(SQLReader(session: .postgres(connection))) }
                }.mapError(StoreError.init))
        }
    }

    package func readAndWait<T: Sendable>(_ work: @escaping @Sendable (any LibraryReader) throws -> T)
        throws(StoreError) -> T
    {
        try waitFor { self.read(work, completion: $0) }
    }

    /// Runs `work` with a reader of this engine's SQL and waits for it (tests).
    package func readSQLAndWait<T: Sendable>(_ work: @escaping @Sendable (SQLReader) throws -> T) throws(StoreError)
        -> T
    {
        try waitFor { self.readSQL(work, completion: $0) }
    }

    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite?,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        writer.write(StoreWrite(work: work, plan: plan, completion: completion))
    }

    package func observeTransactions(_ observer: @escaping @Sendable (_ duration: Duration, _ writes: Int) -> Void) {
        writer.observeTransactions(observer)
    }

    /// Writable when the server answers and is a primary, not a read-only standby.
    package func checkWritable(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        readers.submit { connection in
            completion(
                Result {
                    let result = try connection.get().execute("SELECT pg_is_in_recovery()")
                    if result.bool(0, 0) ?? true { throw StoreError(.unavailable, detail: "the server is a standby") }
                }.mapError(StoreError.init))
        }
    }

    @discardableResult
    package func close() -> StoreError? {
        readers.close()
        writer.close()
        feed.close()
        return nil
    }

    func openSnapshotReader() throws -> (any SnapshotReader)? {
        PGSnapshotReader(connection: try address.connect())
    }
}

extension PostgresLibraryStore: LiveStore {
    package func latestCommittedSeq() throws(StoreError) -> Int { feed.applied }

    /// How many of this replica's write batches waited for another replica's lock.
    package var lockWaits: Int { writer.lockWaits.load(ordering: .relaxed) }

    /// How many changes the change feed handed to the live engine, by where it found them.
    package var feedCounts: FeedCounts { feed.counts }

    package func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        feed.observe(observer)
    }

    package func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        loadState(target, completion: completion)
    }

    package func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        readWindow(window, among: among, completion: completion)
    }
}

/// A PostgreSQL connection of its own for one large collection snapshot, on its own queue.
final class PGSnapshotReader: SnapshotReader, @unchecked Sendable {
    // `@unchecked Sendable`: the connection is used on `queue` only.
    private var connection: PGConnection?
    private let queue = DispatchQueue(label: "postgres.snapshot")

    init(connection: PGConnection) {
        self.connection = connection
    }

    func async(_ work: @escaping @Sendable (SQLSession) -> Void) {
        queue.async {
            guard let connection = self.connection else { return }
            work(.postgres(connection))
        }
    }

    func close() {
        queue.async { self.connection = nil }
    }
}
