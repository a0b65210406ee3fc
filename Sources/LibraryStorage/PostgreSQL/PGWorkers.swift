import Dispatch
import LibraryDomain
import PostgreSQL
import Synchronization

/// A fixed set of threads, each with a PostgreSQL connection of its own, taking jobs from one
/// queue: the event loops hand reads here and never wait on the network themselves.
///
/// A connection that failed is dropped and opened again for the next job, so after the server
/// restarts the workers reconnect by themselves; meanwhile jobs fail at once as unavailable.
final class PGWorkers: Sendable {
    typealias Job = @Sendable (Result<PGConnection, PGError>) -> Void

    private struct State {
        var jobs: [Job] = []
        var head = 0
        var closed = false
    }

    private let address: PGAddress
    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()
    let count: Int

    init(address: PGAddress, count: Int, label: String) {
        self.address = address
        self.count = count
        for index in 0..<count {
            finished.enter()
            DispatchQueue(label: "\(label).\(index)").async { [self] in
                work()
                finished.leave()
            }
        }
    }

    /// Runs `job` on the next free worker with its connection (or why none could be opened).
    func submit(_ job: @escaping Job) {
        let accepted = state.withLock { state in
            guard !state.closed else { return false }
            state.jobs.append(job)
            return true
        }
        guard accepted else {
            return job(.failure(PGError.closing))
        }
        ready.signal()
    }

    private func next() -> Job? {
        ready.wait()
        return state.withLock { state -> Job? in
            guard state.head < state.jobs.count else { return nil }
            let job = state.jobs[state.head]
            state.head += 1
            if state.head > 64, state.head * 2 > state.jobs.count {
                state.jobs.removeFirst(state.head)
                state.head = 0
            }
            return job
        }
    }

    private func work() {
        // Connected at once, so that a running server holds a steady set of connections; one
        // that cannot connect now tries again at its first job.
        var connection = try? address.connect()
        while let job = next() {
            if connection.map({ !$0.isOpen }) ?? true {
                connection = nil
                do {
                    connection = try address.connect()
                } catch {
                    job(.failure(error))
                    continue
                }
            }
            job(.success(connection!))
        }
    }

    /// Runs the jobs already queued, then stops every worker and closes its connection.
    func close() {
        state.withLock { $0.closed = true }
        for _ in 0..<count { ready.signal() }
        finished.wait()
    }
}

extension PGConnection {
    /// Runs `work` in one repeatable-read transaction: everything it reads describes one moment.
    func readTransaction<T>(_ work: () throws -> T) throws -> T {
        try executeScript("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            let value = try work()
            try executeScript("COMMIT")
            return value
        } catch {
            _ = try? executeScript("ROLLBACK")
            throw error
        }
    }
}
