/// What an event stream can watch: one resource, or a collection.
package enum LiveTarget: Hashable, Sendable {
    case book(String)
    case library(String)
    /// Every library.
    case libraries
    /// The books matching a filter, as `GET /books` with it lists them.
    case books(BookFilter)
    /// The first rows of a sorted or searched list of books (`BookWindow`), kept as they move.
    case window(BookWindow)

    /// The id of the one resource watched; nil for a collection.
    package var resourceID: String? {
        switch self {
        case .book(let id), .library(let id): id
        case .libraries, .books, .window: nil
        }
    }

    /// Whether this is a collection (its items come and go; it is never deleted).
    package var isCollection: Bool {
        switch self {
        case .libraries, .books, .window: true
        case .book, .library: false
        }
    }

    /// What a replay of this target reads from the change log: the target itself, except that a
    /// book collection reads by its library alone (the log is not searched by the other filtered
    /// fields; the live side tests every change against the whole filter), so collections that
    /// differ only in those share one read.
    package var logQuery: LiveTarget {
        switch self {
        case .books(let filter): .books(filter.libraryOnly)
        case .window(let window): .books(window.query.filter.libraryOnly)
        case .book, .library, .libraries: self
        }
    }
}

/// A watched resource as one read transaction saw it, with the id of the latest change included.
package struct LoadedState: Sendable {
    package enum Resource: Sendable {
        case book(BookRecord)
        /// A library and its books, in insertion order.
        case library(LibraryRecord, members: [BookRecord])
    }

    /// The latest committed change the read saw: the state is exactly the one after it.
    package let seq: Int
    /// Nil when no such resource exists at `seq`.
    package let resource: Resource?

    package init(seq: Int, resource: Resource?) {
        self.seq = seq
        self.resource = resource
    }
}

/// What the live engine needs from storage, and all it knows of it: commits in order, consistent
/// loads of a resource, and the change log for resuming streams.
///
/// The seam a second storage engine implements. Loads and change-log reads run off the event
/// loops and each in one read transaction, so a state and its change id always describe one moment.
package protocol LiveStore: AnyObject, Sendable {
    /// How many changes the log keeps at least: resuming from an older id gets a fresh snapshot.
    var history: Int { get }

    /// The id of the latest committed change (0 before any); read once at start.
    func latestCommittedSeq() throws(StoreError) -> Int

    /// Sets who is told of every committed change, in commit order, on the writer's thread.
    func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void)

    /// Reads `target` (a library with its members) and the latest change id in one transaction.
    func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void)

    /// As `load`, but a library's members are handed to `members` as they are read (in order, a
    /// batch at a time, on the reading thread, with the read's change id and how many members the
    /// library has by its `bookCount`, so that whoever collects them makes room once) and left out
    /// of the state: whoever makes models of them starts before the read ends. The batch is
    /// `inout` so that it can be taken whole (`swap`), its records then moved rather than copied.
    /// A store that cannot hand them out as it reads hands them all at once (the default).
    func load(
        _ target: LiveTarget,
        members: @escaping @Sendable (_ seq: Int, _ expected: Int, _ batch: inout [BookRecord]) -> Void,
        completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void
    )

    /// The logged changes after `seq` (through `last`, or every one when nil) that concern
    /// `target`, in order: for a library, also its members' joins, departures and changes; for a
    /// book collection, at least every change of a book of its library (`LiveTarget.logQuery`),
    /// which the live side tests against the filter. Nil when
    /// the log no longer holds every change after `seq`. One read transaction, so a prune cannot
    /// remove part of what it returns.
    func changes(
        of target: LiveTarget,
        after seq: Int,
        through last: Int?,
        completion: @escaping @Sendable (Result<[CommittedChange]?, StoreError>) -> Void
    )

    /// Whether the change log holds the deletion of `target` (a book or library) at or before
    /// `seq`: what tells a resumed watch whose resource is gone that its client already got the
    /// `delete`, from one whose resource never existed (or went before the kept history).
    func loggedDeletion(
        of target: LiveTarget,
        through seq: Int,
        completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    )

    /// Reads the rows of `window` (of the libraries `among` only, when given) and the latest
    /// change id in one read transaction, off the event loops: one page of the list's index.
    func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void)

    /// Opens a paged snapshot of a collection (`.libraries` or `.books(filter)`), `pageSize` items
    /// a page: of the libraries `among` (and their books) only, when given.
    func snapshot(of collection: LiveTarget, pageSize: Int, among: Set<String>?) -> any CollectionSnapshot
}

extension LiveStore {
    package func load(
        _ target: LiveTarget,
        members: @escaping @Sendable (_ seq: Int, _ expected: Int, _ batch: inout [BookRecord]) -> Void,
        completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void
    ) {
        load(target) { result in
            guard case .success(let state) = result, case .library(let library, var records)? = state.resource else {
                return completion(result)
            }
            members(state.seq, records.count, &records)
            completion(.success(LoadedState(seq: state.seq, resource: .library(library, members: []))))
        }
    }
}

/// A window of a list of books, watched live: the first `limit` books `query` lists from `start`
/// (`/books/events?libraryId=…&sort=title&limit=50&q=…&cursor=…`).
package struct BookWindow: Sendable, Hashable {
    package var query: BookQuery
    /// `.seq` exactly when the query has no order, as for `LibraryReader.books`.
    package var start: ListStart
    package var limit: Int

    /// How many rows a window holds at most: a page of `GET /books`.
    package static let limits = 1...500

    package init(_ query: BookQuery, start: ListStart, limit: Int) {
        precondition(Self.limits.contains(limit), "a window holds \(Self.limits) rows")
        if case .seq = start { precondition(query.order == nil) } else { precondition(query.order != nil) }
        self.query = query
        self.start = start
        self.limit = limit
    }
}

/// One page of a collection's snapshot.
package struct CollectionPage: Sendable {
    package enum Items: Sendable {
        case libraries([LibraryRecord])
        case books([BookRecord])

        package var count: Int {
            switch self {
            case .libraries(let items): items.count
            case .books(let items): items.count
            }
        }
    }

    /// The latest change the snapshot includes: every page describes the state right after it.
    package let seq: Int
    package let items: Items
    /// Whether this page ends the snapshot.
    package let isLast: Bool

    package init(seq: Int, items: Items, isLast: Bool) {
        self.seq = seq
        self.items = items
        self.isLast = isLast
    }
}

/// A collection's items read in one read transaction, a page at a time, at the pace of whoever
/// sends them: however large the collection, only a page is in memory.
package protocol CollectionSnapshot: AnyObject, Sendable {
    /// Reads the next page, in list order (the first call fixes the moment the snapshot shows).
    func next(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void)
    /// Ends the read, whether or not every page was read.
    func close()
    /// Sets who is told (on another thread) when the snapshot is ended for its client: one that
    /// left a page untaken while other snapshots waited for the connection this one holds. The
    /// snapshot is closed by then.
    func whenPreempted(_ handler: @escaping @Sendable () -> Void)
}
