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
    /// One stream's deadline.
    @LiveActor final class Entry {
        let second: Int
        fileprivate var action: (@LiveActor () -> Void)?

        fileprivate init(second: Int, action: @escaping @LiveActor () -> Void) {
            self.second = second
            self.action = action
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

    /// Entries waiting, for tests and metrics.
    var count: Int { buckets.values.reduce(0) { $0 + $1.entries.count } }

    /// Runs `action` on the live actor once `second` has come (at once, on the next turn, if it has).
    func schedule(at second: Int, _ action: @escaping @LiveActor () -> Void) -> Entry {
        let entry = Entry(second: second, action: action)
        if buckets[second] == nil {
            let timer = DispatchSource.makeTimerSource(queue: LiveActor.executor.queue)
            let delay = max(0, second - clock())
            timer.schedule(deadline: .now() + .seconds(delay))
            timer.setEventHandler { [weak self] in LiveActor.assumeIsolated { self?.fire(second) } }
            timer.resume()
            buckets[second] = Bucket(timer: timer)
        }
        buckets[second]!.entries[ObjectIdentifier(entry)] = entry
        return entry
    }

    /// Forgets `entry`: its action never runs.
    func cancel(_ entry: Entry) {
        entry.action = nil
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
            let action = entry.action
            entry.action = nil
            action?()
        }
    }
}
