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
    private struct State {
        var waiting: [@Sendable (Result<Void, StoreError>) -> Void] = []
        /// When the probe under way started, in nanoseconds of the monotonic clock.
        var inFlightSince: UInt64?
        var started = 0
        var last: (result: Result<Void, StoreError>, at: UInt64)?
    }

    /// How long a probe's answer is given to checks without a new probe finishing, in nanoseconds.
    static let freshFor: UInt64 = 60_000_000_000
    /// How long a probe may run before checks report the database as not answering.
    static let stalledAfter: UInt64 = 30_000_000_000

    private let store: any LibraryDatabase
    private let state = Mutex(State())

    init(store: any LibraryDatabase) {
        self.store = store
    }

    /// Probes started since launch (for /metrics).
    var probesStarted: Int { state.withLock { $0.started } }

    /// Health checks waiting for the probe under way (for /metrics).
    var waiting: Int { state.withLock { $0.waiting.count } }

    /// What a check gets without waiting.
    private enum Answer {
        case now(Result<Void, StoreError>)
        case wait
    }

    /// Calls `completion` with the last probe's recent answer, or with the result of the probe
    /// under way or of a new one.
    func check(_ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let (answer, start) = state.withLock { state -> (Answer, Bool) in
            // Read under the lock: a time read before it could be older than one another thread
            // stored meanwhile, and the differences below would go negative.
            let now = DispatchTime.now().uptimeNanoseconds
            var start = false
            if state.inFlightSince == nil {
                state.inFlightSince = now
                state.started += 1
                start = true
            }
            if let since = state.inFlightSince, now - since >= Self.stalledAfter {
                return (.now(.failure(StoreError(.unavailable, detail: "no probe answered for 30 s"))), start)
            }
            // A recent success stands while the probe under way runs; after a failure, checks wait
            // for the probe, so that a database back in order is reported as such at once.
            if let last = state.last, case .success = last.result, now - last.at < Self.freshFor {
                return (.now(last.result), start)
            }
            state.waiting.append(completion)
            return (.wait, start)
        }
        if case .now(let result) = answer { completion(result) }
        guard start else { return }
        store.read({ reader in try reader.ping() }) { result in
            guard case .failure = result else {
                return self.store.checkWritable { self.finish($0) }
            }
            self.finish(result.map { _ in () })
        }
    }

    private func finish(_ result: Result<Void, StoreError>) {
        let waiting = state.withLock { state in
            state.inFlightSince = nil
            state.last = (result, DispatchTime.now().uptimeNanoseconds)
            defer { state.waiting = [] }
            return state.waiting
        }
        for completion in waiting { completion(result) }
    }
}
