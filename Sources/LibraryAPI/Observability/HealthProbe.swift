import LibraryDomain
import Synchronization

/// The database check behind `/healthz`, run at most once at a time: health checks that arrive
/// while a probe is under way wait for it and share its result.
///
/// A probe takes the writer's lock, so a flood of health checks would otherwise queue one write
/// each and compete with real writes; this way they cost one probe however many there are.
final class HealthProbe: Sendable {
    private struct State {
        var waiting: [@Sendable (Result<Void, StoreError>) -> Void] = []
        var inFlight = false
        var started = 0
    }

    private let store: any LibraryDatabase
    private let state = Mutex(State())

    init(store: any LibraryDatabase) {
        self.store = store
    }

    /// Probes started since launch (for /metrics).
    var probesStarted: Int { state.withLock { $0.started } }

    /// Health checks waiting for the probe under way (for /metrics).
    var waiting: Int { state.withLock { $0.waiting.count } }

    /// Calls `completion` with the result of the probe under way, or of a new one.
    func check(_ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let start = state.withLock { state in
            state.waiting.append(completion)
            guard !state.inFlight else { return false }
            state.inFlight = true
            state.started += 1
            return true
        }
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
            state.inFlight = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for completion in waiting { completion(result) }
    }
}
