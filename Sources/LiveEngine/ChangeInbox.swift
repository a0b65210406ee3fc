import LibraryDomain
import Synchronization

/// Committed changes on their way from the writer's thread to the live side.
///
/// The writer posts every commit; the live side takes everything waiting in one turn, so a group
/// of commits costs one hop, not one per write. While the live side keeps up the inbox holds a
/// handful of changes. If it falls behind by more than `capacity` changes (a burst, a huge
/// snapshot being built), what waits folds into one change per resource, as a slow reader's
/// events fold: the latest state and id win and the changed fields add up. Memory is then bounded
/// by how much distinct state changed, never by the write rate.
final class ChangeInbox: Sendable {
    /// Changes folded together: one item per resource, in first-touched order.
    private struct Fold {
        var firstSeq: Int?
        var seq = 0
        var items: [ChangeItem] = []
        var index: [String: Int] = [:]

        mutating func add(_ change: CommittedChange) {
            if firstSeq == nil { firstSeq = change.firstSeq }
            seq = change.seq
            for item in change.items {
                if let position = index[item.key] {
                    items[position] = items[position].merged(with: item)
                } else {
                    index[item.key] = items.count
                    items.append(item)
                }
            }
        }
    }

    private struct State {
        var changes: [CommittedChange] = []
        var fold: Fold?
        var scheduled = false
        /// Whether the live side has anything watched or loading. While it has not, no change can
        /// concern a subscriber and commits skip the inbox altogether.
        var open = false
        /// The latest change that skipped the inbox: the live side is past it too.
        var skipped = 0
    }

    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds a committed change. Returns whether it was taken (not when the inbox is closed),
    /// whether the live side must be woken to take it (nothing was waiting), and how many changes
    /// were folded into others to make room.
    func post(_ change: CommittedChange) -> (taken: Bool, wake: Bool, folded: Int) {
        state.withLock { state in
            guard state.open else {
                state.skipped = change.seq
                return (false, false, 0)
            }
            var folded = 0
            if state.fold != nil {
                state.fold!.add(change)
                folded = 1
            } else if state.changes.count >= capacity {
                var fold = Fold()
                state.changes.forEach { fold.add($0) }
                fold.add(change)
                folded = state.changes.count
                state.changes = []
                state.fold = fold
            } else {
                state.changes.append(change)
            }
            defer { state.scheduled = true }
            return (true, !state.scheduled, folded)
        }
    }

    /// Opens or closes the inbox. Closing drops what waits (nothing is watched that it could
    /// concern) as if it had skipped the inbox. On opening, returns the latest change that skipped
    /// it: nothing was watched when it committed, so whatever starts watching now reads it from the
    /// database, and the live side can count it, and anything older, as applied.
    func setOpen(_ open: Bool) -> Int? {
        state.withLock { state in
            guard state.open != open else { return nil }
            state.open = open
            if !open {
                let last = state.fold?.seq ?? state.changes.last?.seq
                if let last, last > state.skipped { state.skipped = last }
                state.changes = []
                state.fold = nil
            }
            return open ? state.skipped : nil
        }
    }

    /// While the inbox is closed, the latest change that skipped it (nil while it is open).
    var skippedWhileClosed: Int? {
        state.withLock { $0.open ? nil : $0.skipped }
    }

    /// Takes everything waiting, in commit order (a fold as one change with the latest id); the
    /// next post wakes the live side again.
    func take() -> [CommittedChange] {
        state.withLock { state in
            var taken = state.changes
            if let fold = state.fold {
                taken = [CommittedChange(seq: fold.seq, items: fold.items, firstSeq: fold.firstSeq)]
            }
            state.changes = []
            state.fold = nil
            state.scheduled = false
            return taken
        }
    }
}
