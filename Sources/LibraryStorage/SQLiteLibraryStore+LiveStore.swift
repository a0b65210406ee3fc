import LibraryDomain

extension SQLiteLibraryStore: LiveStore, LibraryDatabase {
    package func latestCommittedSeq() throws(StoreError) -> Int {
        try readSQLAndWait { try $0.latestSeq() }
    }

    package func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        loadState(target, completion: completion)
    }

    package func load(
        _ target: LiveTarget,
        members: @escaping @Sendable (_ seq: Int, _ expected: Int, _ batch: inout [BookRecord]) -> Void,
        completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void
    ) {
        load(target, batchesOf: Self.loadBatch, members: members, completion: completion)
    }

    func load(
        _ target: LiveTarget,
        batchesOf size: Int,
        members: @escaping @Sendable (_ seq: Int, _ expected: Int, _ batch: inout [BookRecord]) -> Void,
        completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void
    ) {
        guard case .library(let id) = target else { return loadState(target, completion: completion) }
        readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                guard let library = try reader.library(id: id) else { return LoadedState(seq: seq, resource: nil) }
                try reader.allBooks(inLibrary: id, batchesOf: size) { members(seq, library.bookCount, &$0) }
                return LoadedState(seq: seq, resource: .library(library, members: []))
            },
            completion: completion)
    }

    /// How many members a library's load hands out at a time; in debug builds few enough that the
    /// tests' libraries of thousands of books are loaded in several batches.
    #if DEBUG
        static let loadBatch = 1_000
    #else
        static let loadBatch = 16_384
    #endif

}

/// `LiveStore`'s reads, the same on both engines: each one read transaction.
extension SnapshotSource {
    func loadState(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                switch target {
                case .book(let id):
                    return LoadedState(seq: seq, resource: try reader.book(id: id).map { .book($0) })
                case .libraries, .books, .window:
                    preconditionFailure("a collection is read by pages (snapshot(of:pageSize:)), not loaded")
                case .library(let id):
                    guard let library = try reader.library(id: id) else { return LoadedState(seq: seq, resource: nil) }
                    return LoadedState(
                        seq: seq, resource: .library(library, members: try reader.allBooks(inLibrary: id)))
                }
            },
            completion: completion
        )
    }

    /// `LiveStore.read(_:among:completion:)`, on either engine.
    func readWindow(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                let page = try reader.books(window.query, after: window.start, limit: window.limit, among: among)
                return CollectionPage(seq: seq, items: .books(page.items), isLast: true)
            },
            completion: completion)
    }

    func loggedChanges(
        of target: LiveTarget,
        after seq: Int,
        through last: Int?,
        completion: @escaping @Sendable (Result<[CommittedChange]?, StoreError>) -> Void
    ) {
        readInTransaction(
            { reader in
                guard try reader.oldestKeptSeq() <= seq + 1 else { return nil }
                let last = try last ?? reader.latestSeq()
                switch target {
                case .book(let id): return try reader.changes(ofBook: id, after: seq, through: last)
                case .library(let id): return try reader.changes(ofLibrary: id, after: seq, through: last)
                case .libraries, .books, .window:
                    return try reader.changes(ofCollection: target.logQuery, after: seq, through: last)
                }
            },
            completion: completion
        )
    }

    /// The change log's replay, on either engine (`LiveStore.changes`).
    package func changes(
        of target: LiveTarget,
        after seq: Int,
        through last: Int?,
        completion: @escaping @Sendable (Result<[CommittedChange]?, StoreError>) -> Void
    ) {
        loggedChanges(of: target, after: seq, through: last, completion: completion)
    }

    package func loggedDeletion(
        of target: LiveTarget,
        through seq: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) {
        readInTransaction({ try $0.hasLoggedDeletion(of: target, through: seq) }, completion: completion)
    }

    package func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        readWindow(window, among: among, completion: completion)
    }

    package func snapshot(of collection: LiveTarget, pageSize: Int, among: Set<String>?) -> any CollectionSnapshot {
        PagedSnapshot(store: self, target: collection, pageSize: pageSize, among: among)
    }
}
