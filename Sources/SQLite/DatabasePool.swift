import Dispatch
import Synchronization

/// One writer connection and a few reader connections, each confined to its own serial queue.
///
/// SQLite in WAL mode lets readers run while the single writer commits. Work is submitted as a
/// closure that receives the connection on that connection's queue, so no connection is ever used
/// by two threads at once, and no event-loop thread ever waits for a write or a checkpoint. Short
/// reads may run on the caller's thread (`readNow(lane:)`, one reader per event loop): an indexed
/// lookup takes microseconds, less than handing it to another thread and back would.
///
/// Writes run one turn at a time on the writer's queue (`write`); the store groups them into
/// transactions there (`LibraryStorage`'s `GroupCommitter`). Checkpoints run mostly off the
/// writer (`Checkpointer`).
package final class DatabasePool: Sendable {
    private let writer: Confined
    /// One reader per event loop (`readNow(lane:)`), so loops never wait for each other.
    private let lanes: [Confined]
    /// Readers for work handed off the loops (`read`): long reads such as a large library's
    /// snapshot or a replay, which no loop must wait behind.
    private let background: [Confined]
    private let next = Counter()
    /// Nil for `:memory:`, which has no WAL.
    private let checkpointer: Checkpointer?
    private let path: String
    private let busyTimeoutMilliseconds: Int32

    /// Opens the writer (running `prepare` on it first, e.g. migrations), then `laneCount` readers
    /// for the event loops and `backgroundReaderCount` for work handed off them.
    /// A checkpoint starts when the WAL holds `checkpointPages` pages (`Checkpointer`).
    /// A `:memory:` database has no separate readers: reads share the writer's queue.
    package init(
        path: String,
        laneCount: Int = 2,
        backgroundReaderCount: Int = 2,
        busyTimeoutMilliseconds: Int32 = 5_000,
        checkpointPages: Int = 4_000,
        prepare: (Connection) throws -> Void = { _ in }
    ) throws {
        self.path = path
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        let writerConnection = try Connection(
            path: path, role: .writer, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        try prepare(writerConnection)
        checkpointer =
            path == ":memory:"
            ? nil
            : try Checkpointer(
                path: path, writer: writerConnection, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
                threshold: checkpointPages)
        writer = Confined(writerConnection, label: "sqlite.writer")
        if path == ":memory:" {
            lanes = [writer]
            background = [writer]
        } else {
            func open(_ count: Int, _ label: String) throws -> [Confined] {
                try (0..<max(1, count)).map { index in
                    Confined(
                        try Connection(path: path, role: .reader, busyTimeoutMilliseconds: busyTimeoutMilliseconds),
                        label: "sqlite.\(label).\(index)")
                }
            }
            lanes = try open(laneCount, "lane")
            background = try open(backgroundReaderCount, "reader")
        }
    }

    /// A reader connection of its own, on its own queue, for a read transaction that lasts across
    /// many jobs (a collection snapshot sent page by page, at the pace its client reads): it holds
    /// no pooled reader meanwhile. Nil for `:memory:`, whose data no other connection can see.
    package func dedicatedReader(label: String) throws -> DedicatedReader? {
        guard path != ":memory:" else { return nil }
        let connection = try Connection(path: path, role: .reader, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        return DedicatedReader(Confined(connection, label: label))
    }

    /// Runs `work` with a background reader connection, on that connection's queue.
    package func read(_ work: @escaping @Sendable (Connection) -> Void) {
        let reader = background.count == 1 ? background[0] : background[next.increment() % background.count]
        reader.async(work)
    }

    /// Runs `work` with a reader connection on the calling thread, once no other work uses that
    /// connection, and returns its result. Callers that give distinct `lane`s (one per event
    /// loop) get distinct readers, so they never wait for each other; without one, readers are
    /// taken in turn.
    package func readNow<T>(lane: Int? = nil, _ work: (Connection) throws -> T) throws -> T {
        let index = lane ?? next.increment()
        return try lanes[index % lanes.count].sync(work)
    }

    /// Runs `work` with the writer connection, on the writer's queue; writes are serialized.
    package func write(_ work: @escaping @Sendable (Connection) -> Void) {
        writer.async { connection in
            work(connection)
            self.checkpointer?.afterCommit(on: connection)
        }
    }

    /// Runs `work` on the writer's queue and waits for its result.
    package func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (Connection) throws -> T) throws -> T {
        try writer.sync { connection in
            defer { checkpointer?.afterCommit(on: connection) }
            return try work(connection)
        }
    }

    /// Finishes queued work, checkpoints the WAL and closes every connection (readers first).
    ///
    /// Returns why the checkpoint failed, if it did (a full disk, say). Nothing is lost then: the
    /// WAL stays beside the database and is replayed when it is next opened.
    @discardableResult
    package func close() -> (any Error)? {
        for reader in lanes + background where reader !== writer { reader.close() }
        checkpointer?.close()
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

/// A reader connection owned by one long read (`DatabasePool.dedicatedReader`), closed by `close`.
package final class DedicatedReader: Sendable {
    private let confined: Confined

    init(_ confined: Confined) {
        self.confined = confined
    }

    /// Runs `work` with the connection, on its queue, after the work given before.
    package func async(_ work: @escaping @Sendable (Connection) -> Void) {
        confined.async(work)
    }

    /// Closes the connection once the work given before has run.
    package func close() {
        confined.async { _ in self.confined.release() }
    }
}

/// A connection and the serial queue that owns it.
final class Confined: @unchecked Sendable {  // `connection` is only touched on `queue`.
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

    /// Drops the connection; called on `queue`.
    func release() {
        connection = nil
    }
}
