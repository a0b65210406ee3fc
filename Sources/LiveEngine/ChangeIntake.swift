import LibraryDomain

/// Committed changes on their way from the writer to the live models, and how far the live side
/// has got: the bounded inbox the writer posts into (`ChangeInbox`: changes fold when the live side
/// is behind, and skip it while nothing is watched), the last change applied, and who waits for a
/// change to be applied (`whenApplied`).
@LiveActor
final class ChangeIntake {
    nonisolated let inbox: ChangeInbox
    private nonisolated let counters: LiveCounters
    /// The last change applied to the models, or that skipped the closed inbox (it concerned nobody).
    private(set) var appliedSeq = 0
    /// Who waits for the live side to reach a change, in no order.
    private var waiters: [(seq: Int, callback: @LiveActor () -> Void)] = []

    nonisolated init(capacity: Int, counters: LiveCounters) {
        inbox = ChangeInbox(capacity: capacity)
        self.counters = counters
    }

    /// Called on the writer's thread for every commit, in commit order. Returns whether the live
    /// side must be woken to take what waits.
    nonisolated func post(_ change: CommittedChange) -> Bool {
        counters.committedSeq.raise(to: change.seq)
        let (taken, wake, folded) = inbox.post(change)
        guard taken else {
            // Nothing is watched or loading: no subscriber can be affected (a load that starts
            // later reads this change from the database).
            counters.publishedSeq.raise(to: change.seq)
            return false
        }
        if folded > 0 { counters.folded.add(folded, ordering: .relaxed) }
        return wake
    }

    /// The changes waiting, in commit order.
    func take() -> [CommittedChange] { inbox.take() }

    /// Whether `seq` is past what the models have applied.
    func isNew(_ seq: Int) -> Bool { seq > appliedSeq }

    /// The models are at change `seq`: its events are handed over.
    func applied(through seq: Int) {
        appliedSeq = max(appliedSeq, seq)
    }

    /// Opens the inbox while anything is materialized, loading or watching a collection, closes it
    /// when nothing is.
    func setOpen(_ open: Bool) {
        if let skipped = inbox.setOpen(open), skipped > appliedSeq {
            appliedSeq = skipped
            wakeWaiters()
        }
    }

    /// Calls `callback` once every change through `seq` has been applied and published (at once
    /// if it has).
    func whenApplied(through seq: Int, _ callback: @escaping @LiveActor () -> Void) {
        // While the inbox is closed, a change that skipped it concerned nobody: as good as applied.
        if let skipped = inbox.skippedWhileClosed, skipped > appliedSeq { appliedSeq = skipped }
        if seq <= appliedSeq { return callback() }
        waiters.append((seq, callback))
    }

    /// Calls those who waited for a change applied by now.
    func wakeWaiters() {
        guard !waiters.isEmpty else { return }
        let due = waiters.filter { $0.seq <= appliedSeq }
        guard !due.isEmpty else { return }
        waiters.removeAll { $0.seq <= appliedSeq }
        due.forEach { $0.callback() }
    }
}
