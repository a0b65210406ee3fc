import Dispatch
import LibraryDomain
import Synchronization

/// Libraries and books in this process's memory: the store seam's third implementation, beside
/// SQLite and PostgreSQL, with nothing of SQL. It keeps nothing across restarts; it proves that
/// the API and the live engine need only the seam (`LibraryDatabase`, `RecordRows`), and runs the
/// API suite without a database (`LIBRARY_TEST_ENGINE=memory`).
///
/// The write rules are `LibraryWriter`'s, as on the other engines; this store only keeps rows,
/// the change log and the kept `Idempotency-Key` answers. Writes run one at a time on a queue of
/// their own, each a transaction: a write that throws is undone, one that succeeds is seen whole
/// by the next read. Reads take the same lock, so each sees one moment.
package final class MemoryLibraryStore: LibraryDatabase {
    package let history: Int
    package var appliedMigrationNames: [String] { [] }
    package var engineHeapBytes: Int? { nil }

    /// Guards `data`: every read and every write holds it for its whole transaction.
    private let lock = Mutex(())
    /// Read and written only while `lock` is held.
    private nonisolated(unsafe) let data = MemoryData()
    private let writes = DispatchQueue(label: "library.memory.writes")
    private let reads = DispatchQueue(label: "library.memory.reads", attributes: .concurrent)
    private let observers = Mutex(Observers())
    private let closed = Atomic(false)

    private struct Observers {
        var commit: (@Sendable (CommittedChange) -> Void)?
        var transaction: (@Sendable (Duration, Int) -> Void)?
    }

    /// An empty store that keeps at least `history` changes for resuming event streams.
    package init(history: Int = 10_000) {
        self.history = history
    }

    // MARK: Reads

    package func read<T: Sendable>(
        lane: Int?,
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        completion(readNow(work))
    }

    package func read<T: Sendable>(
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        reads.async { completion(self.readNow(work)) }
    }

    package func readAndWait<T: Sendable>(_ work: @escaping @Sendable (any LibraryReader) throws -> T)
        throws(StoreError) -> T
    {
        try readNow(work).get()
    }

    /// Runs `work` on the data as committed now, on the calling thread.
    private func readNow<T>(_ work: (MemoryRows) throws -> T) -> Result<T, StoreError> {
        lock.withLock { _ in Result { try work(MemoryRows(data)) }.mapError(Self.storeError) }
    }

    // MARK: Writes

    /// `plan` is not used: a write here is one step in memory, with nothing to send ahead.
    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite?,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        writes.async {
            guard !self.closed.load(ordering: .acquiring) else {
                return completion(.failure(StoreError(.unavailable, detail: "the store is closed")))
            }
            let started = ContinuousClock.now
            let outcome = self.lock.withLock { _ -> Result<(T, CommittedChange?), StoreError> in
                let rows = MemoryRows(self.data)
                let writer = LibraryWriter(rows: rows)
                do {
                    let result = try work(writer)
                    guard !writer.items.isEmpty else { return .success((result, nil)) }
                    return .success((result, self.data.log(writer.items, history: self.history)))
                } catch {
                    rows.undo()
                    return .failure(Self.storeError(error))
                }
            }
            let observers = self.observers.withLock { $0 }
            observers.transaction?(ContinuousClock.now - started, 1)
            switch outcome {
            case .success(let (result, change)):
                if let change { observers.commit?(change) }
                completion(.success(result))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    package func observeTransactions(_ observer: @escaping @Sendable (_ duration: Duration, _ writes: Int) -> Void) {
        observers.withLock { $0.transaction = observer }
    }

    package func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        observers.withLock { $0.commit = observer }
    }

    package func checkWritable(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        writes.async {
            completion(
                self.closed.load(ordering: .acquiring)
                    ? .failure(StoreError(.unavailable, detail: "the store is closed")) : .success(()))
        }
    }

    /// Finishes the queued writes; later ones fail as unavailable.
    @discardableResult
    package func close() -> StoreError? {
        writes.sync { closed.store(true, ordering: .releasing) }
        return nil
    }

    // MARK: The live engine's reads

    package func latestCommittedSeq() throws(StoreError) -> Int {
        lock.withLock { _ in data.latestSeq }
    }

    package func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        reads.async {
            completion(
                self.lock.withLock { _ in
                    let data = self.data
                    switch target {
                    case .book(let id):
                        return .success(LoadedState(seq: data.latestSeq, resource: data.books[id].map { .book($0) }))
                    case .library(let id):
                        guard let library = data.libraries[id] else {
                            return .success(LoadedState(seq: data.latestSeq, resource: nil))
                        }
                        let members = data.bookOrder.compactMap { data.books[$0.id] }.filter { $0.library == id }
                        return .success(LoadedState(seq: data.latestSeq, resource: .library(library, members: members)))
                    case .libraries, .books, .window:
                        preconditionFailure("a collection is read by pages (snapshot(of:pageSize:)), not loaded")
                    }
                })
        }
    }

    package func changes(
        of target: LiveTarget,
        after seq: Int,
        through last: Int?,
        completion: @escaping @Sendable (Result<[CommittedChange]?, StoreError>) -> Void
    ) {
        reads.async {
            completion(.success(self.lock.withLock { _ in self.data.changes(of: target, after: seq, through: last) }))
        }
    }

    package func loggedDeletion(
        of target: LiveTarget,
        through seq: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        reads.async {
            let found = self.lock.withLock { _ in
                self.data.log.contains { change in
                    change.seq <= seq
                        && change.items.contains { item in
                            switch (item, target) {
                            case (.book(let book, _, _, let deleted), .book(let id)): deleted && book.id == id
                            case (.library(let library, _, let deleted), .library(let id)): deleted && library.id == id
                            default: false
                            }
                        }
                }
            }
            completion(.success(found))
        }
    }

    package func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        reads.async {
            completion(
                self.readNow { rows in
                    let page = try rows.books(window.query, after: window.start, limit: window.limit, among: among)
                    return CollectionPage(seq: self.data.latestSeq, items: .books(page.items), isLast: true)
                })
        }
    }

    /// The whole collection as one read saw it, handed out a page at a time.
    package func snapshot(of collection: LiveTarget, pageSize: Int, among: Set<String>?) -> any CollectionSnapshot {
        MemorySnapshot(pageSize: pageSize) { [self] in
            lock.withLock { _ in
                switch collection {
                case .libraries:
                    (
                        data.latestSeq,
                        .libraries(
                            data.libraryOrder.compactMap { data.libraries[$0.id] }
                                .filter { among?.contains($0.id) ?? true })
                    )
                case .books(let filter):
                    (
                        data.latestSeq,
                        .books(
                            data.bookOrder.compactMap { data.books[$0.id] }
                                .filter { filter.matches($0.keys) && among?.contains($0.library) ?? true })
                    )
                case .book, .library, .window:
                    preconditionFailure("a single resource is loaded, and a window read (read(_:among:)), not paged")
                }
            }
        }
    }

    private static func storeError(_ error: any Error) -> StoreError {
        error as? StoreError ?? StoreError(.internal, detail: "\(error)")
    }
}

/// A collection snapshot of the memory store: read whole at the first page.
private final class MemorySnapshot: CollectionSnapshot {
    private let pageSize: Int
    private let read: @Sendable () -> (Int, CollectionPage.Items)
    /// The moment read and the items not yet handed out; nil before the first page.
    private let remaining = Mutex<(seq: Int, items: CollectionPage.Items)?>(nil)

    init(pageSize: Int, read: @escaping @Sendable () -> (Int, CollectionPage.Items)) {
        self.pageSize = pageSize
        self.read = read
    }

    func next(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let page = remaining.withLock { remaining -> CollectionPage in
            let (seq, items) = remaining ?? read()
            let (page, rest): (CollectionPage.Items, CollectionPage.Items)
            switch items {
            case .libraries(let all):
                (page, rest) = (.libraries(Array(all.prefix(pageSize))), .libraries(Array(all.dropFirst(pageSize))))
            case .books(let all):
                (page, rest) = (.books(Array(all.prefix(pageSize))), .books(Array(all.dropFirst(pageSize))))
            }
            remaining = (seq, rest)
            return CollectionPage(seq: seq, items: page, isLast: rest.count == 0)
        }
        completion(.success(page))
    }

    func close() {
        remaining.withLock { $0 = (0, .books([])) }
    }

    /// Never preempted: it holds no connection.
    func whenPreempted(_ handler: @escaping @Sendable () -> Void) {}
}
