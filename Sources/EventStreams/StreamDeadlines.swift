import Dispatch
import Glibc
import LiveEngine

/// When streams' credentials expire: each stream opened with a signed token is given an entry at
/// the second its token stops verifying, and ends then with an `expired` event
/// (`EventStreamSink.expire`, `Multiplexer.expire`), so a stream never outlives its credential.
///
/// Entries are grouped by second, with one timer per second that has any: 18,000 streams whose
/// tokens expire over an hour cost at most 3,600 timers, and an entry cancelled (its stream
/// closed, or given a new token) is dropped at once.
@LiveActor
final class StreamDeadlines {
    /// What ends when its deadline comes: a stream's sink, or a multiplexed stream.
    @LiveActor protocol Expiring: AnyObject {
        func expire()
    }

    /// One stream's deadline, made when the stream opens and cancelled when it closes. It holds
    /// its stream until then (no weak reference, no closure: 18,000 streams pay one small object
    /// and a dictionary slot each).
    @LiveActor final class Entry {
        let second: Int
        fileprivate var target: (any Expiring)?

        fileprivate init(second: Int) {
            self.second = second
        }
    }

    private struct Bucket {
        let timer: any DispatchSourceTimer
        var entries: [ObjectIdentifier: Entry] = [:]
    }

    private var buckets: [Int: Bucket] = [:]
    /// The current second since 1970 (the clock tokens are verified by).
    private let clock: @Sendable () -> Int

    nonisolated init(clock: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        self.clock = clock
    }

    isolated deinit {
        for bucket in buckets.values { bucket.timer.cancel() }
    }

    /// Entries waiting, for tests and metrics.
    var count: Int { buckets.values.reduce(0) { $0 + $1.entries.count } }

    /// Calls `target.expire()` on the live actor once `second` has come (on the next turn, if it
    /// has), unless cancelled first.
    func schedule(_ target: any Expiring, at second: Int) -> Entry {
        let entry = reserve(at: second)
        arm(entry, target)
        return entry
    }

    /// An entry for `second` whose target comes later (`arm`): made before a stream opens, so that
    /// the stream's close, set up as it opens, can cancel it.
    func reserve(at second: Int) -> Entry {
        let entry = Entry(second: second)
        if buckets[second] == nil {
            let timer = DispatchSource.makeTimerSource(queue: LiveActor.executor.queue)
            let delay = max(0, second - clock())
            timer.schedule(deadline: .now() + .seconds(delay))
            // Unowned, not weak (a weak reference would give this object a side table that a
            // pending timer keeps): every timer is cancelled before this object goes (`deinit`).
            timer.setEventHandler { [unowned self] in LiveActor.assumeIsolated { self.fire(second) } }
            timer.resume()
            buckets[second] = Bucket(timer: timer)
        }
        buckets[second]!.entries[ObjectIdentifier(entry)] = entry
        return entry
    }

    /// Gives a reserved entry its target (unless it was cancelled meanwhile).
    func arm(_ entry: Entry, _ target: any Expiring) {
        guard buckets[entry.second]?.entries[ObjectIdentifier(entry)] != nil else { return }
        entry.target = target
    }

    /// Forgets `entry`: its target is let go and never told.
    func cancel(_ entry: Entry) {
        entry.target = nil
        guard var bucket = buckets[entry.second] else { return }
        bucket.entries[ObjectIdentifier(entry)] = nil
        if bucket.entries.isEmpty {
            bucket.timer.cancel()
            buckets[entry.second] = nil
        } else {
            buckets[entry.second] = bucket
        }
    }

    private func fire(_ second: Int) {
        guard let bucket = buckets.removeValue(forKey: second) else { return }
        bucket.timer.cancel()
        for entry in bucket.entries.values {
            let target = entry.target
            entry.target = nil
            target?.expire()
        }
    }
}
