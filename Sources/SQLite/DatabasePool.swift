import Dispatch

/// One writer connection and a few reader connections, each confined to its own serial queue.
///
/// SQLite in WAL mode lets readers run while the single writer commits. Work is submitted as a
/// closure that receives the connection on that connection's queue, so no connection is ever used
/// by two threads at once, and no event-loop thread ever blocks on SQLite.
package final class DatabasePool: Sendable {
    private let writer: Confined
    private let readers: [Confined]
    private let next = Counter()

    /// Opens the writer (running `prepare` on it first, e.g. migrations), then `readerCount` readers.
    /// A `:memory:` database has no separate readers: reads share the writer's queue.
    package init(
        path: String,
        readerCount: Int = 4,
        busyTimeoutMilliseconds: Int32 = 5_000,
        prepare: (Connection) throws -> Void = { _ in }
    ) throws {
        let writerConnection = try Connection(
            path: path, role: .writer, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        try prepare(writerConnection)
        writer = Confined(writerConnection, label: "sqlite.writer")
        if path == ":memory:" || readerCount == 0 {
            readers = [writer]
        } else {
            readers = try (0..<readerCount).map { index in
                Confined(
                    try Connection(path: path, role: .reader, busyTimeoutMilliseconds: busyTimeoutMilliseconds),
                    label: "sqlite.reader.\(index)")
            }
        }
    }

    /// Runs `work` with a reader connection, on that connection's queue.
    package func read(_ work: @escaping @Sendable (Connection) -> Void) {
        let reader = readers.count == 1 ? readers[0] : readers[next.increment() % readers.count]
        reader.async(work)
    }

    /// Runs `work` with the writer connection, on the writer's queue; writes are serialized.
    package func write(_ work: @escaping @Sendable (Connection) -> Void) {
        writer.async(work)
    }

    /// Runs `work` on the writer's queue and waits for its result.
    package func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (Connection) throws -> T) throws -> T {
        try writer.sync(work)
    }

    /// Finishes queued work, checkpoints the WAL and closes every connection (readers first).
    ///
    /// Returns why the checkpoint failed, if it did (a full disk, say). Nothing is lost then: the
    /// WAL stays beside the database and is replayed when it is next opened.
    @discardableResult
    package func close() -> (any Error)? {
        for reader in readers where reader !== writer { reader.close() }
        var failure: (any Error)?
        do {
            try writer.sync { try $0.checkpoint() }
        } catch {
            failure = error
        }
        writer.close()
        return failure
    }
}

/// A connection and the serial queue that owns it.
private final class Confined: @unchecked Sendable {  // `connection` is only touched on `queue`.
    private var connection: Connection?
    private let queue: DispatchQueue

    init(_ connection: Connection, label: String) {
        self.connection = connection
        self.queue = DispatchQueue(label: label)
    }

    func async(_ work: @escaping @Sendable (Connection) -> Void) {
        queue.async {
            guard let connection = self.connection else { return }
            work(connection)
        }
    }

    func sync<T>(_ work: (Connection) throws -> T) throws -> T {
        try queue.sync {
            guard let connection = self.connection else {
                throw SQLiteError(code: 21, message: "the database is closed")
            }
            return try work(connection)
        }
    }

    func close() {
        queue.sync { self.connection = nil }
    }
}
