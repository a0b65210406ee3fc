import Dispatch
import LibraryDomain

/// The one executor that owns every live model and subscriber: a serial dispatch queue.
///
/// A queue (rather than the default actor executor) lets the store's writer thread hand over each
/// committed change with `LiveActor.enqueue`, in commit order, without creating a task per change.
package final class LiveExecutor: SerialExecutor {
    package let queue = DispatchQueue(label: "library.live")
    private let key = DispatchSpecificKey<Bool>()

    init() {
        queue.setSpecific(key: key, value: true)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    package func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    package func isIsolatingCurrentContext() -> Bool? {
        DispatchQueue.getSpecific(key: key) == true
    }
}

/// The global actor of the live models (`LiveBook`, `LiveLibrary`) and of `LiveHub`.
@globalActor
package actor LiveActor {
    package static let shared = LiveActor()
    package static let executor = LiveExecutor()

    package nonisolated var unownedExecutor: UnownedSerialExecutor {
        Self.executor.asUnownedSerialExecutor()
    }

    /// Runs `body` on the live executor after everything enqueued before it (first in, first out).
    package static func enqueue(_ body: @escaping @Sendable @LiveActor () -> Void) {
        executor.queue.async { assumeIsolated(body) }
    }

    /// Runs `body` synchronously, asserting that the caller is on the live executor.
    ///
    /// Observation calls `onChange` on the thread that mutates, which for live models is always
    /// this executor; this is how such a callback regains the actor's isolation. The cast drops
    /// only the isolation attribute, after checking it holds (as `MainActor.assumeIsolated` does).
    package static func assumeIsolated<T>(_ body: @LiveActor () throws -> T) rethrows -> T {
        dispatchPrecondition(condition: .onQueue(executor.queue))
        return try withoutActuallyEscaping(body) { body in
            try unsafeBitCast(body, to: (() throws -> T).self)()
        }
    }
}
