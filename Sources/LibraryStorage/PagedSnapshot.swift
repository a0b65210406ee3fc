import Dispatch
import LibraryDomain
import SQLite
import Synchronization

/// A collection snapshot: one read transaction on a reader connection of its own, kept open
/// across pages (SQLite's WAL, or PostgreSQL's repeatable-read snapshot, gives it a fixed view
/// however long the client takes), each page an index search after the last one's position.
///
/// Most collections fit in one page: that page is read on a pooled reader first, and only a larger
/// collection opens a connection of its own (at most `SnapshotSlots.limit` at once; the others
/// wait their turn), starting over in its own transaction. A `:memory:` database has no second
/// connection that could see its data; there a large snapshot is read whole in one transaction
/// and handed out a page at a time.
final class PagedSnapshot: CollectionSnapshot {
    private struct State {
        var began = false
        var finished = false
        var closed = false
        var seq = 0
        /// The list position (`seq` column) the next page continues after.
        var after = 0
        /// Pages read ahead (a one-page collection, or `:memory:`).
        var pages: [CollectionPage]?
        var reader: (any SnapshotReader)?
    }

    private let store: any SnapshotSource
    private let target: LiveTarget
    private let pageSize: Int
    private let state = Mutex(State())

    init(store: any SnapshotSource, target: LiveTarget, pageSize: Int) {
        self.store = store
        self.target = target
        self.pageSize = pageSize
    }

    func next(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let (queued, reader) = state.withLock { state -> (CollectionPage?, (any SnapshotReader)?) in
            guard let pages = state.pages, !pages.isEmpty else { return (nil, state.reader) }
            return (state.pages!.removeFirst(), nil)
        }
        if let queued { return completion(.success(queued)) }
        guard let reader else { return first(completion: completion) }
        reader.async { session in
            completion(Result { try self.page(session) }.mapError(StoreError.init))
        }
    }

    /// The first page, from a pooled reader: the whole snapshot when it fits; otherwise the
    /// snapshot starts over on a connection of its own.
    private func first(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let (target, pageSize) = (target, pageSize)
        store.readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                let (items, next) = try Self.read(target, reader, after: 0, limit: pageSize)
                return (CollectionPage(seq: seq, items: items, isLast: next == nil))
            },
            completion: { result in
                guard case .success(let page) = result, !page.isLast else { return completion(result) }
                self.store.snapshotSlots.acquire {
                    let opened = Result { try self.store.openSnapshotReader() }
                    let closed = self.state.withLock { state in
                        if case .success(let reader) = opened { state.reader = reader }
                        return state.closed
                    }
                    switch opened {
                    case .failure(let error):
                        self.store.snapshotSlots.release()
                        completion(.failure(StoreError(error)))
                    case .success(nil):
                        self.store.snapshotSlots.release()
                        self.readWhole(completion: completion)
                    case .success(.some):
                        // Closed meanwhile: this closes the connection and frees the slot.
                        if closed { return self.close() }
                        self.next(completion: completion)
                    }
                }
            })
    }

    private func page(_ session: SQLSession) throws -> CollectionPage {
        let reader = LibraryReader(session: session)
        var current = state.withLock { $0 }
        precondition(!current.finished, "a finished snapshot was read again")
        do {
            if !current.began {
                try session.beginReadTransaction()
                current.began = true
                current.seq = try reader.latestSeq()
            }
            let (items, next) = try Self.read(target, reader, after: current.after, limit: pageSize)
            current.after = next ?? current.after
            if next == nil {
                current.finished = true
                try session.execute("COMMIT")
            }
            store(current)
            return CollectionPage(seq: current.seq, items: items, isLast: next == nil)
        } catch {
            current.finished = true
            store(current)
            if current.began { session.rollback() }
            throw error
        }
    }

    /// Writes back what a page read changes, and nothing else (`close` may have run meanwhile).
    private func store(_ read: State) {
        state.withLock { state in
            state.began = read.began
            state.finished = read.finished
            state.seq = read.seq
            state.after = read.after
        }
    }

    private static func read(_ target: LiveTarget, _ reader: LibraryReader, after: Int, limit: Int) throws
        -> (CollectionPage.Items, next: Int?)
    {
        if case .books(let filter) = target {
            let page = try reader.books(filter, after: after, limit: limit)
            return (.books(page.items), page.next)
        }
        let page = try reader.libraries(after: after, limit: limit)
        return (.libraries(page.items), page.next)
    }

    /// `:memory:`: the snapshot read whole in one transaction, handed out a page at a time.
    private func readWhole(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let (target, pageSize) = (target, pageSize)
        store.readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                var pages: [CollectionPage] = []
                var after = 0
                while true {
                    let (items, next) = try Self.read(target, reader, after: after, limit: pageSize)
                    pages.append(CollectionPage(seq: seq, items: items, isLast: next == nil))
                    guard let next else { return pages }
                    after = next
                }
            },
            completion: { result in
                switch result {
                case .failure(let error): completion(.failure(error))
                case .success(var pages):
                    let first = pages.removeFirst()
                    self.state.withLock { $0.pages = pages }
                    completion(.success(first))
                }
            })
    }

    func close() {
        let reader = state.withLock { state -> (any SnapshotReader)? in
            state.closed = true
            defer { state.reader = nil }
            return state.reader
        }
        guard let reader else { return }
        reader.async { session in
            let open = self.state.withLock { state in
                defer { state.finished = true }
                return state.began && !state.finished
            }
            if open { session.rollback() }
        }
        reader.close()
        store.snapshotSlots.release()
    }
}

/// Where `PagedSnapshot` reads: a store of either engine.
protocol SnapshotSource: AnyObject, Sendable {
    var snapshotSlots: SnapshotSlots { get }

    /// Runs `work` in one read transaction on a pooled reader.
    func readInTransaction<T: Sendable>(
        _ work: @escaping @Sendable (LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// A connection of its own for one large snapshot; nil when no other connection can see the
    /// data (SQLite's `:memory:`).
    func openSnapshotReader() throws -> (any SnapshotReader)?
}

/// A connection of its own, used on its own queue, closed by `close`.
protocol SnapshotReader: Sendable {
    func async(_ work: @escaping @Sendable (SQLSession) -> Void)
    func close()
}

extension DedicatedReader: SnapshotReader {
    func async(_ work: @escaping @Sendable (SQLSession) -> Void) {
        async { (connection: Connection) in work(.sqlite(connection)) }
    }
}

extension LibraryStore: SnapshotSource {
    func openSnapshotReader() throws -> (any SnapshotReader)? {
        try pool.dedicatedReader(label: "sqlite.snapshot")
    }
}

/// Bounds how many snapshots hold a connection of their own at once (each is a file descriptor
/// or three, and a read transaction that keeps the WAL from being checkpointed past it).
final class SnapshotSlots: Sendable {
    static let limit = 16
    private let state = Mutex<(free: Int, waiting: [@Sendable () -> Void])>((limit, []))

    /// Calls `work` once a slot is free: at once, on the caller's thread, if one is; else on
    /// another thread once one is freed (never on the freeing thread, which may be the live
    /// actor's, while `work` opens a connection).
    func acquire(_ work: @escaping @Sendable () -> Void) {
        let now = state.withLock { state in
            guard state.free > 0 else {
                state.waiting.append(work)
                return false
            }
            state.free -= 1
            return true
        }
        if now { work() }
    }

    func release() {
        let next = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        if let next { DispatchQueue.global().async(execute: next) }
    }
}
