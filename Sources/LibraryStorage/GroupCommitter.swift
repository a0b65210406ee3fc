import Dispatch
import LibraryDomain
import SQLite
import Synchronization

/// One write as a store's group commit runs it: the work, then, once committed or failed, its
/// answer.
protocol QueuedWrite: AnyObject, Sendable {
    /// Runs the write with `writer` in the open transaction; returns the items it changed (empty:
    /// none). It may run again in a new transaction (when a write of its batch aborts one), so it
    /// keeps nothing from an earlier run but its latest result.
    func run(_ writer: LibraryWriter) throws -> [ChangeItem]
    /// What the write is, when its caller knew it ahead: a single-field `PATCH`, whose one
    /// statement an engine may send ahead with others.
    var plan: SingleFieldWrite? { get }
    /// Called once: with nil after the commit that made the write durable (`change` set when it
    /// changed something), or with why it failed.
    func finish(_ change: CommittedChange?, _ error: (any Error)?)
}

/// A write handed to a store (`LibraryDatabase.write`): its work's result goes to `completion`
/// once committed.
///
/// `@unchecked Sendable`: `result` is set and read on the writer's queue only.
final class StoreWrite<T: Sendable>: QueuedWrite, @unchecked Sendable {
    let work: @Sendable (LibraryWriter) throws -> T
    let completion: @Sendable (Result<T, StoreError>) -> Void
    let plan: SingleFieldWrite?
    private var result: T?

    init(
        work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite? = nil,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        self.work = work
        self.plan = plan
        self.completion = completion
    }

    func run(_ writer: LibraryWriter) throws -> [ChangeItem] {
        result = nil
        result = try work(writer)
        return writer.items
    }

    func finish(_ change: CommittedChange?, _ error: (any Error)?) {
        guard error == nil, let result else {
            return completion(
                .failure(StoreError(error ?? StoreError(.internal, detail: "the write produced nothing"))))
        }
        completion(.success(result))
    }
}

/// What one write did in an open transaction (`WriteTransactions.run`).
enum WriteRun {
    /// It ran: the change it logged, nil when it changed nothing.
    case ran(CommittedChange?)
    /// It failed without changing anything (not found, invalid, stale `If-Match`: the usual
    /// failures); the transaction goes on with the others.
    case refused(any Error)
    /// It failed after changing rows, or the transaction failed under it: the engine has rolled
    /// the transaction back. `fatal` when the connection is gone too: the others fail with it.
    case aborted(any Error, fatal: Bool)
}

/// The part of group commit that differs by engine: one transaction's statements.
protocol WriteTransactions {
    /// Opens a transaction for `writes` and returns them in the order to run them (PostgreSQL runs
    /// first those whose single-field statement it sent ahead and that changed their row).
    /// `rerun` when an earlier transaction of the same writes was aborted. An engine that had to
    /// wait (PostgreSQL's lock, held by another replica) may add the writes queued meanwhile, taken
    /// with `more` (at most as many as it asks for), to `writes` before it can fail.
    func begin(_ writes: inout [any QueuedWrite], rerun: Bool, more: (Int) -> [any QueuedWrite]) throws
        -> [any QueuedWrite]
    /// Runs one write in the open transaction, and logs its change.
    func run(_ write: any QueuedWrite) -> WriteRun
    /// Commits the open transaction holding `changes` (the engine may write their log here); on
    /// failure the transaction is rolled back before this throws.
    func commit(_ changes: [CommittedChange]) throws
}

/// Group commit, the same on every engine: the writes waiting when the writer becomes free are
/// committed together in one transaction (up to `maximumBatch`; the rest get the next turn), so
/// under load one commit serves many writes, and nothing waits to fill a batch, so a lone write
/// commits at once.
///
/// Every write is answered only after the commit that holds its batch, in the order run, its
/// refusal too: a 404, 412 or 422 may follow from the writes before it in the batch (a book one
/// of them deleted, a version one of them counted), so it is given only once those are durable,
/// and becomes the commit's failure (a 503) if the commit fails. A write that aborts the
/// transaction fails alone: the others run again in a new transaction. No savepoints (SQLite would
/// copy every page a write touches into a statement journal; PostgreSQL would pay a round trip
/// each): no write is answered before its commit, so nobody sees an undone attempt.
final class GroupCommitter: Sendable {
    private struct Pending {
        var writes: [any QueuedWrite] = []
        var scheduled = false
        var closed = false
    }

    /// The most writes one transaction takes, which bounds how long the first of them waits.
    private let maximumBatch: Int
    private let pending = Mutex(Pending())
    /// Runs a turn on the writer's queue, with the engine's transactions there.
    private let turn: @Sendable (@escaping @Sendable (any WriteTransactions) -> Void) -> Void
    /// Told of each transaction's committed changes, in id order, before their writes are answered.
    private let committed: @Sendable ([CommittedChange]) -> Void
    /// In a struct: a bare closure read out of a `Mutex` (`withLock { $0 }`) is written back
    /// wrapped in one more pair of reabstraction thunks per read, so each commit would be slower
    /// than the last (swiftlang/swift#91348).
    private struct TransactionObserver: Sendable {
        let notify: @Sendable (Duration, Int) -> Void
    }

    private let transactionObserver = Mutex<TransactionObserver?>(nil)

    init(
        maximumBatch: Int,
        turn: @escaping @Sendable (@escaping @Sendable (any WriteTransactions) -> Void) -> Void,
        committed: @escaping @Sendable ([CommittedChange]) -> Void
    ) {
        self.maximumBatch = maximumBatch
        self.turn = turn
        self.committed = committed
    }

    /// Sets what is told how long each transaction took and how many writes it committed.
    func observeTransactions(_ observer: @escaping @Sendable (Duration, Int) -> Void) {
        transactionObserver.withLock { $0 = TransactionObserver(notify: observer) }
    }

    /// Queues `write` for the next turn; once closing, fails it as unavailable.
    func submit(_ write: any QueuedWrite) {
        let schedule = pending.withLock { state -> Bool? in
            guard !state.closed else { return nil }
            state.writes.append(write)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard let schedule else {
            return write.finish(nil, StoreError(.unavailable, detail: "the store is closing"))
        }
        if schedule { turn { self.commitPending(with: $0) } }
    }

    /// Refuses new writes and returns once those queued are answered (each turn schedules the
    /// next; `drain` waits for the writer's queue).
    func close(drain: () -> Void) {
        pending.withLock { $0.closed = true }
        while pending.withLock({ $0.scheduled }) { drain() }
    }

    private func commitPending(with transactions: any WriteTransactions) {
        let (batch, more) = pending.withLock { state in
            let batch = state.writes.prefix(maximumBatch)
            state.writes.removeFirst(batch.count)
            state.scheduled = !state.writes.isEmpty
            return (Array(batch), state.scheduled)
        }
        commit(batch, with: transactions)
        if more { turn { self.commitPending(with: $0) } }
    }

    /// Up to `most` of the writes queued for a later turn, taken for the one under way.
    private func takeQueued(_ most: Int) -> [any QueuedWrite] {
        pending.withLock { state in
            let taken = state.writes.prefix(max(0, most))
            state.writes.removeFirst(taken.count)
            return Array(taken)
        }
    }

    /// Commits `writes`, in as few transactions as their failures allow, each answered after its
    /// commit.
    private func commit(_ writes: [any QueuedWrite], with transactions: any WriteTransactions) {
        var remaining = writes
        var rerun = false
        while !remaining.isEmpty {
            let started = ContinuousClock.now
            let ordered: [any QueuedWrite]
            do {
                ordered = try transactions.begin(&remaining, rerun: rerun, more: takeQueued)
            } catch {
                return remaining.forEach { $0.finish(nil, error) }
            }
            /// Each write run, with its change (nil: it changed nothing) or why it was refused.
            var ran: [(any QueuedWrite, Result<CommittedChange?, any Error>)] = []
            var aborted = false
            for (position, write) in ordered.enumerated() {
                switch transactions.run(write) {
                case .ran(let change):
                    ran.append((write, .success(change)))
                case .refused(let error):
                    ran.append((write, .failure(error)))
                case .aborted(let error, let fatal):
                    write.finish(nil, error)
                    let others = ran.map(\.0) + ordered[(position + 1)...]
                    if fatal { return others.forEach { $0.finish(nil, error) } }
                    remaining = others
                    aborted = true
                }
                if aborted { break }
            }
            if aborted {
                rerun = true
                continue
            }
            let changes = ran.compactMap { try? $0.1.get() }
            do {
                try transactions.commit(changes)
            } catch {
                return ran.forEach { $0.0.finish(nil, error) }
            }
            let succeeded = ran.count { if case .success = $0.1 { true } else { false } }
            transactionObserver.withLock { $0 }?.notify(ContinuousClock.now - started, succeeded)
            if !changes.isEmpty { committed(changes) }
            for (write, outcome) in ran {
                switch outcome {
                case .success(let change): write.finish(change, nil)
                case .failure(let error): write.finish(nil, error)
                }
            }
            return
        }
    }
}
