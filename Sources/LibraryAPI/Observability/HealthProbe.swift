import Dispatch
import LibraryDomain
import Synchronization

/// The database check behind `/healthz`, run at most once at a time, and never waited for by a
/// health check when a recent answer exists.
///
/// A probe takes the writer's lock, so a flood of health checks would otherwise queue one write
/// each and compete with real writes; this way they cost one probe however many there are.
///
/// A probe's read waits in the readers' queue with the snapshot and list reads: under a heavy
/// load of them it can take seconds, while the server answers every request. A health check does
/// not wait for it when the last probe succeeded recently (`freshFor`): it gets that answer and
/// the probe under way refreshes it. Only a probe stuck for `stalledAfter` turns into a failure
/// (a database that no longer answers). After a failure, and with no earlier answer at all (the
/// first check after start), a check waits for the probe.
final class HealthProbe: Sendable {
    private let store: any LibraryDatabase
    private let state = Mutex(HealthProbeState())
    /// The monotonic clock, in nanoseconds, read under the lock.
    private let clock: @Sendable () -> UInt64

    init(store: any LibraryDatabase, clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds })
    {
        self.store = store
        self.clock = clock
    }

    /// Probes started since launch (for /metrics).
    var probesStarted: Int { state.withLock { $0.started } }

    /// Health checks waiting for the probe under way (for /metrics).
    var waiting: Int { state.withLock { $0.waiting.count } }

    /// Calls `completion` with the last probe's recent answer, or with the result of the probe
    /// under way or of a new one.
    func check(_ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        // The time is read under the lock: one read before it could be older than one another
        // thread stored meanwhile, and the state's differences would go negative.
        let (answer, start) = state.withLock { $0.check(now: clock(), completion) }
        if let answer { completion(answer) }
        guard start else { return }
        store.read({ reader in try reader.ping() }) { result in
            guard case .failure = result else {
                return self.store.checkWritable { self.finish($0) }
            }
            self.finish(result.map { _ in () })
        }
    }

    private func finish(_ result: Result<Void, StoreError>) {
        let waiting = state.withLock { $0.finish(result, now: clock()) }
        for completion in waiting { completion(result) }
    }
}

/// The rules of `/healthz`'s probe, apart from the database and the clock: what a check gets at
/// time `now` (nanoseconds of a monotonic clock), and whether it starts a probe.
struct HealthProbeState {
    var waiting: [@Sendable (Result<Void, StoreError>) -> Void] = []
    /// When the probe under way started.
    private(set) var inFlightSince: UInt64?
    private(set) var started = 0
    private var last: (result: Result<Void, StoreError>, at: UInt64)?

    /// How long a probe's answer is given to checks without a new probe finishing, in nanoseconds.
    static let freshFor: UInt64 = 60_000_000_000
    /// How long a probe may run before checks report the database as not answering.
    static let stalledAfter: UInt64 = 30_000_000_000

    /// A check at `now`: its answer at once (nil: it waits, `completion` kept for `finish`), and
    /// whether a probe must start.
    mutating func check(now: UInt64, _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
        -> (answer: Result<Void, StoreError>?, start: Bool)
    {
        var start = false
        if inFlightSince == nil {
            inFlightSince = now
            started += 1
            start = true
        }
        if let since = inFlightSince, now - since >= Self.stalledAfter {
            return (.failure(StoreError(.unavailable, detail: "no probe answered for 30 s")), start)
        }
        // A recent success stands while the probe under way runs; after a failure, checks wait
        // for the probe, so that a database back in order is reported as such at once.
        if let last, case .success = last.result, now - last.at < Self.freshFor {
            return (last.result, start)
        }
        waiting.append(completion)
        return (nil, start)
    }

    /// The probe under way answered at `now`: returns the checks that waited for it.
    mutating func finish(_ result: Result<Void, StoreError>, now: UInt64)
        -> [@Sendable (Result<Void, StoreError>) -> Void]
    {
        inFlightSince = nil
        last = (result, now)
        defer { waiting = [] }
        return waiting
    }
}
