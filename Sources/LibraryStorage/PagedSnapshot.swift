import LibraryDomain
import SQLite
import Synchronization

/// A collection snapshot over SQLite: one read transaction on a reader connection of its own,
/// kept open across pages (WAL gives it a fixed view however long the client takes), each page
/// an index search after the last one's position.
///
/// A `:memory:` database has no second connection that could see its data; there the snapshot is
/// read whole in one transaction on the shared connection and handed out a page at a time.
final class PagedSnapshot: CollectionSnapshot {
    private struct State {
        var began = false
        var finished = false
        var seq = 0
        /// The list position (`seq` column) the next page continues after.
        var after = 0
        /// `:memory:` only: the pages read at once.
        var pages: [CollectionPage]?
    }

    private let store: LibraryStore
    private let target: LiveTarget
    private let pageSize: Int
    private let reader: DedicatedReader?
    private let state = Mutex(State())

    init(store: LibraryStore, target: LiveTarget, pageSize: Int) {
        self.store = store
        self.target = target
        self.pageSize = pageSize
        reader = try? store.pool.dedicatedReader(label: "sqlite.snapshot")
    }

    func next(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        guard let reader else { return nextInMemory(completion: completion) }
        reader.async { connection in
            completion(
                Result { try self.page(LibraryReader(connection: connection), connection) }.mapError(StoreError.init))
        }
    }

    private func page(_ reader: LibraryReader, _ connection: Connection) throws -> CollectionPage {
        var current = state.withLock { $0 }
        precondition(!current.finished, "a finished snapshot was read again")
        do {
            if !current.began {
                try connection.execute("BEGIN")
                current.began = true
                current.seq = try reader.latestSeq()
            }
            let (items, next) = try Self.read(target, reader, after: current.after, limit: pageSize)
            current.after = next ?? current.after
            if next == nil {
                current.finished = true
                try connection.execute("COMMIT")
            }
            state.withLock { $0 = current }
            return CollectionPage(seq: current.seq, items: items, isLast: next == nil)
        } catch {
            current.finished = true
            state.withLock { $0 = current }
            if current.began { connection.rollback() }
            throw error
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

    private func nextInMemory(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let queued = state.withLock { state -> CollectionPage? in
            guard let pages = state.pages, !pages.isEmpty else { return nil }
            return state.pages!.removeFirst()
        }
        if let queued { return completion(.success(queued)) }
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
        guard let reader else { return }
        reader.async { connection in
            let open = self.state.withLock { state in
                defer { state.finished = true }
                return state.began && !state.finished
            }
            if open { connection.rollback() }
        }
        reader.close()
    }
}
