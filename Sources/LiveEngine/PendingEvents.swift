/// What waits to be written for one subscription, by the one rule every waiting place follows: a
/// snapshot replaces whatever waited before it, a change folds into the change that waits
/// (`FoldedChange`: latest value per field and member), and a delete replaces the change that
/// waits and ends the subscription's events.
///
/// A single stream's subscriber keeps one for a connection that fell behind and one for changes
/// held while its replay or snapshot is read (`Subscriber`); a multiplexed stream keeps one per
/// watch until its frame is written (`Multiplexer.Part`). However often a resource changes, what
/// waits is at most a snapshot, one folded change and a delete.
///
/// Every subscriber holds one inline (18,000 subscribers of one book are 18,000 of them), so what
/// is rare, a snapshot or a delete waiting, is kept out of line: inline it is a change and a
/// pointer, not three events.
package struct PendingEvents {
    package private(set) var change: FoldedChange?
    /// A snapshot or a delete waiting; immutable, replaced when either changes (value semantics).
    private var ends: Ends?
    /// Changes folded into one that already waited.
    package private(set) var folded = 0

    private final class Ends: Sendable {
        let snapshot: LiveEvent?
        let delete: LiveEvent?

        init(snapshot: LiveEvent?, delete: LiveEvent?) {
            self.snapshot = snapshot
            self.delete = delete
        }
    }

    package init() {}

    package var snapshot: LiveEvent? { ends?.snapshot }
    package var delete: LiveEvent? { ends?.delete }
    package var isEmpty: Bool { change == nil && ends == nil }

    package mutating func add(_ event: LiveEvent) {
        switch event.kind {
        case .snapshot:
            ends = Ends(snapshot: event, delete: nil)
            change = nil
        case .change:
            if change == nil {
                change = FoldedChange(event)
            } else {
                change!.fold(event)
                folded += 1
            }
        case .delete:
            change = nil
            ends = Ends(snapshot: ends?.snapshot, delete: event)
        }
    }

    /// What waits, in the order it is written: the snapshot, the change (unless what was folded
    /// cancelled out, such as an item that came and went), the delete. Leaves nothing waiting.
    package mutating func take() -> [LiveEvent] {
        var events: [LiveEvent] = []
        if let snapshot { events.append(snapshot) }
        if let change = change?.event, !change.isEmptyChange { events.append(change) }
        if let delete { events.append(delete) }
        (change, ends) = (nil, nil)
        return events
    }

    /// Drops what waits.
    package mutating func clear() {
        (change, ends) = (nil, nil)
    }
}
