import Glibc

/// Which event loop, if any, runs on the calling thread.
package enum LoopThread {
    /// The loop's number (0, 1, …), or nil on a thread that is not an event loop.
    ///
    /// State kept per loop and indexed by it (a database reader, a metrics shard) is never waited
    /// for by another loop: on a busy machine, a loop preempted while holding a shared lock would
    /// stall the other loop too, which shows in the latency tail.
    package static var index: Int? {
        pthread_getspecific(key).map { Int(bitPattern: $0) - 1 }
    }

    /// Marks the calling thread as running loop `index`.
    static func enter(_ index: Int) {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: index + 1))
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
