import Synchronization

/// Counters and gauges of the live side, readable from any thread (metrics, tests).
package final class LiveCounters: Sendable {
    /// Event-stream subscribers open now.
    package let subscribers = Atomic<Int>(0)
    /// Events handed to event streams.
    package let events = Atomic<Int>(0)
    /// Changes folded into a pending event for a slow reader.
    package let coalesced = Atomic<Int>(0)
    /// Committed changes folded into others because the live side was behind the writer.
    package let folded = Atomic<Int>(0)
    /// The latest committed change, and the latest whose events have been published: their
    /// difference is how far the live side is behind the writer.
    package let committedSeq = Atomic<Int>(0)
    package let publishedSeq = Atomic<Int>(0)
    /// Units of work done to apply committed changes: one per resource a change touched that is
    /// materialized, per resource whose events were built, per event delivered. Tests read it to
    /// check that a change costs work for what it touched only, not for a whole library.
    package let applyWork = Atomic<Int>(0)
    /// Observation trackers armed on models since start (each fires once, then is armed again at
    /// the model's next change). Tests read it to check that a library's members are not armed
    /// until they change.
    package let trackersArmed = Atomic<Int>(0)
    /// Event streams ended because their credential expired.
    package let expiredStreams = Atomic<Int>(0)
    /// Refreshed kept snapshots encoded ahead of the subscribers joining (`KeptSnapshots`).
    package let snapshotsEncodedAhead = Atomic<Int>(0)

    /// Reads of a window's rows (`LiveWindow`): one when it opens, then one per change that took
    /// a member out of a full window. Tests read it to check that other writes read nothing.
    package let windowReads = Atomic<Int>(0)
    /// Windows open now.
    package let windows = Atomic<Int>(0)

    /// Committed changes not yet published.
    package var lag: Int {
        max(0, committedSeq.load(ordering: .relaxed) - publishedSeq.load(ordering: .relaxed))
    }
}

extension Atomic<Int> {
    /// Raises the value to `value` unless it is already higher (ids published out of step).
    func raise(to value: Int) {
        var current = load(ordering: .relaxed)
        while current < value {
            let (exchanged, original) = compareExchange(
                expected: current, desired: value, successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
