import Dispatch
import LibraryDomain
import SQLite
import Synchronization

/// A collection snapshot: one read transaction on a reader connection of its own, kept open
/// across pages (SQLite's WAL, or PostgreSQL's repeatable-read snapshot, gives it a fixed view
/// however long the client takes), each page an index search after the last one's position.
/// The page after the one handed out is read meanwhile (one, never more), so that reading a page
/// overlaps making and sending the one before.
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
        /// On a connection of its own: the next page, read ahead while the last one is sent.
        var ahead: Result<CollectionPage, StoreError>?
        /// Whether a page is being read on that connection.
        var reading = false
        /// Who asked for the page being read before it was read.
        var waiter: (@Sendable (Result<CollectionPage, StoreError>) -> Void)?
        var reader: (any SnapshotReader)?
        /// The slot `reader` holds.
        var lease: SnapshotSlots.Lease?
        /// Told when the slot is taken back (`SnapshotSlots`): the snapshot is closed by then.
        var onPreempted: (@Sendable () -> Void)?
    }

    private let store: any SnapshotSource
    private let target: LiveTarget
    /// The libraries whose items it holds (nil: every one).
    private let among: Set<String>?
    private let pageSize: Int
    private let state = Mutex(State())

    init(store: any SnapshotSource, target: LiveTarget, pageSize: Int, among: Set<String>? = nil) {
        self.among = among
        self.store = store
        self.target = target
        self.pageSize = pageSize
    }

    func next(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        enum Next {
            case queued(CollectionPage), ahead(Result<CollectionPage, StoreError>), first, waiting, read
        }
        let (next, lease) = state.withLock { state -> (Next, SnapshotSlots.Lease?) in
            if let pages = state.pages, !pages.isEmpty { return (.queued(state.pages!.removeFirst()), nil) }
            guard state.reader != nil else { return (.first, nil) }
            if let ahead = state.ahead {
                state.ahead = nil
                return (.ahead(ahead), state.lease)
            }
            state.waiter = completion
            // The page the last one's hand-over started is being read: it goes to `completion`.
            return (state.reading ? .waiting : .read, state.lease)
        }
        lease?.pageRequested()
        switch next {
        case .queued(let page): completion(.success(page))
        case .first: first(completion: completion)
        case .ahead(let page): handOver(page, to: completion)
        case .waiting: break
        case .read: readAhead()
        }
    }

    /// Reads the next page on the snapshot's connection: to whoever waits for it, else kept
    /// until asked for.
    private func readAhead() {
        let reader = state.withLock { state in
            state.reading = state.reader != nil
            return state.reader
        }
        reader?.async { session in
            let page = Result { try self.page(session) }.mapError(StoreError.init)
            let waiter = self.state.withLock { state in
                defer { state.waiter = nil }
                state.reading = false
                if state.waiter == nil { state.ahead = page }
                return state.waiter
            }
            if let waiter { self.handOver(page, to: waiter) }
        }
    }

    /// Hands a page out, after starting to read the one after it.
    private func handOver(
        _ page: Result<CollectionPage, StoreError>,
        to completion: @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        if case .success(let read) = page, !read.isLast { readAhead() }
        state.withLock { $0.lease }?.pageHandedOut()
        completion(page)
    }

    func whenPreempted(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onPreempted = handler }
    }

    /// The slot is taken back from a client that left a page untaken while others waited.
    private func preempt() {
        let handler = state.withLock { $0.onPreempted }
        close()
        handler?()
    }

    /// The first page, from a pooled reader: the whole snapshot when it fits; otherwise the
    /// snapshot starts over on a connection of its own.
    private func first(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let (target, among, pageSize) = (target, among, pageSize)
        store.readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                let (items, next) = try Self.read(target, among, reader, after: 0, limit: pageSize)
                return (CollectionPage(seq: seq, items: items, isLast: next == nil))
            },
            completion: { result in
                guard case .success(let page) = result, !page.isLast else { return completion(result) }
                self.store.snapshotSlots.acquire(preempt: { [weak self] in self?.preempt() }) { lease in
                    guard let lease else {
                        return completion(
                            .failure(StoreError(.unavailable, detail: "every snapshot connection stayed busy")))
                    }
                    let opened = Result { try self.store.openSnapshotReader() }
                    let closed = self.state.withLock { state in
                        if case .success(let reader?) = opened {
                            state.reader = reader
                            state.lease = lease
                        }
                        return state.closed
                    }
                    switch opened {
                    case .failure(let error):
                        self.store.snapshotSlots.release(lease)
                        completion(.failure(StoreError(error)))
                    case .success(nil):
                        self.store.snapshotSlots.release(lease)
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
        let reader = SQLReader(session: session)
        var current = state.withLock { $0 }
        precondition(!current.finished, "a finished snapshot was read again")
        do {
            if !current.began {
                try session.beginReadTransaction()
                current.began = true
                current.seq = try reader.latestSeq()
            }
            let (items, next) = try Self.read(target, among, reader, after: current.after, limit: pageSize)
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

    private static func read(
        _ target: LiveTarget, _ among: Set<String>?, _ reader: SQLReader, after: Int, limit: Int
    ) throws
        -> (CollectionPage.Items, next: Int?)
    {
        switch target {
        case .books(let filter):
            let page = try reader.books(filter, after: after, limit: limit, among: among)
            return (.books(page.items), page.next)
        case .libraries:
            let page = try reader.libraries(after: after, limit: limit, among: among)
            return (.libraries(page.items), page.next)
        case .book, .library, .window:
            preconditionFailure("only a collection is read by pages (a window in one: read(_:among:))")
        }
    }

    /// `:memory:`: the snapshot read whole in one transaction, handed out a page at a time.
    private func readWhole(completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void) {
        let (target, among, pageSize) = (target, among, pageSize)
        store.readInTransaction(
            { reader in
                let seq = try reader.latestSeq()
                var pages: [CollectionPage] = []
                var after = 0
                while true {
                    let (items, next) = try Self.read(target, among, reader, after: after, limit: pageSize)
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
        let (reader, lease) = state.withLock { state -> ((any SnapshotReader)?, SnapshotSlots.Lease?) in
            state.closed = true
            defer {
                state.reader = nil
                state.lease = nil
                state.onPreempted = nil
                state.ahead = nil
                state.waiter = nil
            }
            return (state.reader, state.lease)
        }
        guard let reader, let lease else { return }
        reader.async { session in
            let open = self.state.withLock { state in
                defer { state.finished = true }
                return state.began && !state.finished
            }
            if open { session.rollback() }
        }
        reader.close()
        store.snapshotSlots.release(lease)
    }
}

/// Where `PagedSnapshot` reads: a store of either engine.
protocol SnapshotSource: AnyObject, Sendable {
    var snapshotSlots: SnapshotSlots { get }

    /// Runs `work` in one read transaction on a pooled reader.
    func readInTransaction<T: Sendable>(
        _ work: @escaping @Sendable (SQLReader) throws -> T,
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

extension SQLiteLibraryStore: SnapshotSource {
    func openSnapshotReader() throws -> (any SnapshotReader)? {
        try pool.dedicatedReader(label: "sqlite.snapshot")
    }
}

/// Bounds how many snapshots hold a connection of their own at once (each is a file descriptor
/// or three, and a read transaction that keeps the WAL from being checkpointed past it), and keeps
/// clients that do not read from holding them.
///
/// A snapshot holds its slot while its client takes page after page. A client that stops reading
/// would hold it until the write timeout drops its connection (30 s), and sixteen such clients
/// held every slot (issue "hardening III", item 2: another client's snapshot then waited 29 s).
/// So while others wait, a holder whose last page has sat untaken for `maxIdleHold` (3 s) is preempted:
/// its stream ends (its client reconnects and starts over, as after any failed snapshot) and the
/// slot goes to the next in line. A snapshot that waits `maxWait` for a slot is refused, as a
/// stalled reader would be dropped: its client retries later, instead of the server holding its
/// changes meanwhile.
final class SnapshotSlots: Sendable {
    static let limit = 16
    /// How long a holder may leave a page untaken while another snapshot waits (3 s: a page is
    /// about 150 KB, so a client that takes less than 50 KB/s gives way to the others).
    let maxIdleHold: Duration
    /// How long a snapshot waits for a slot (30 s): the write timeout, after which a client that
    /// reads nothing is dropped too.
    let maxWait: Duration

    init(maxIdleHold: Duration = .seconds(3), maxWait: Duration = .seconds(30)) {
        self.maxIdleHold = maxIdleHold
        self.maxWait = maxWait
    }

    /// One slot, held by one snapshot until `release`.
    final class Lease: Sendable {
        fileprivate let id: Int
        fileprivate let preempt: @Sendable () -> Void
        /// When the page handed out last was handed out, while the client has not asked for the
        /// next one; nil while the snapshot is reading or sending.
        private let idleSince = Mutex<ContinuousClock.Instant?>(nil)

        fileprivate init(id: Int, preempt: @escaping @Sendable () -> Void) {
            self.id = id
            self.preempt = preempt
        }

        /// A page went to the client: from now the slot waits for the client.
        func pageHandedOut() { idleSince.withLock { $0 = .now } }
        /// The client took the page and asks for the next.
        func pageRequested() { idleSince.withLock { $0 = nil } }

        fileprivate func idle(at now: ContinuousClock.Instant) -> Duration? {
            idleSince.withLock { since in since.map { now - $0 } }
        }
    }

    private struct Waiter {
        let since: ContinuousClock.Instant
        let preempt: @Sendable () -> Void
        let grant: @Sendable (Lease?) -> Void
    }

    private struct State {
        var free = SnapshotSlots.limit
        var waiting: [Waiter] = []
        var holders: [Int: Lease] = [:]
        var nextID = 0
        /// Whether a check of waiters and holders is scheduled.
        var checking = false

        mutating func lease(_ preempt: @escaping @Sendable () -> Void) -> Lease {
            nextID += 1
            let lease = Lease(id: nextID, preempt: preempt)
            holders[lease.id] = lease
            return lease
        }
    }

    private let state = Mutex(State())
    /// Holders preempted and waiters refused since start.
    let preemptions = Mutex(0)
    let refusals = Mutex(0)

    /// Calls `grant` with a lease once a slot is free: at once, on the caller's thread, if one is;
    /// else on another thread once one is freed (never on the freeing thread, which may be the live
    /// actor's, while `grant` opens a connection); with nil after `maxWait`. `preempt` is called
    /// (once, on another thread) if the holder must give the slot up; it must end its snapshot,
    /// which releases the lease.
    func acquire(preempt: @escaping @Sendable () -> Void, _ grant: @escaping @Sendable (Lease?) -> Void) {
        let (lease, check) = state.withLock { state -> (Lease?, Bool) in
            guard state.free > 0 else {
                state.waiting.append(Waiter(since: .now, preempt: preempt, grant: grant))
                let check = !state.checking
                state.checking = true
                return (nil, check)
            }
            state.free -= 1
            return (state.lease(preempt), false)
        }
        if let lease { grant(lease) }
        if check { scheduleCheck(after: .zero) }
    }

    func release(_ lease: Lease) {
        let next = state.withLock { state -> (Waiter, Lease)? in
            guard state.holders.removeValue(forKey: lease.id) != nil else { return nil }  // released already
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            let waiter = state.waiting.removeFirst()
            return (waiter, state.lease(waiter.preempt))
        }
        if let (waiter, lease) = next { DispatchQueue.global().async { waiter.grant(lease) } }
    }

    /// While snapshots wait: refuses those past `maxWait`, and preempts idle holders, one per
    /// waiter, the longest idle first.
    private func check() {
        let now = ContinuousClock.now
        let (maxWait, maxIdleHold) = (maxWait, maxIdleHold)
        let (expired, idle, more) = state.withLock { state -> ([Waiter], [Lease], Bool) in
            let expired = state.waiting.filter { now - $0.since >= maxWait }
            state.waiting.removeAll { now - $0.since >= maxWait }
            let idle = state.holders.values
                .compactMap { lease in lease.idle(at: now).flatMap { $0 >= maxIdleHold ? (lease, $0) : nil } }
                .sorted { $0.1 > $1.1 }
                .prefix(state.waiting.count)
                .map(\.0)
            state.checking = !state.waiting.isEmpty
            return (expired, Array(idle), state.checking)
        }
        refusals.withLock { $0 += expired.count }
        preemptions.withLock { $0 += idle.count }
        for waiter in expired { waiter.grant(nil) }
        for lease in idle { lease.preempt() }
        if more { scheduleCheck(after: min(.milliseconds(500), maxIdleHold / 5)) }
    }

    private func scheduleCheck(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { self.check() }
    }
}
