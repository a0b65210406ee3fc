import CSystemLinux
import Dispatch
import Synchronization

/// Gives memory freed after a burst back to the system.
///
/// glibc returns freed memory by itself only from the top of a heap; what a burst of streams, a
/// deep resume or a large snapshot freed in the middle stays resident (issue "hardening III": 3,000
/// abandoned streams left 543 MiB that `malloc_trim(0)` brought back to 35 MiB). Every few seconds
/// this looks at how much of the anonymous memory the process holds resident is not handed out
/// (`RssAnon` less malloc's bytes in use), and past `threshold` trims the heap. Not malloc's free
/// bytes alone: they count pages already given back too, and stay high after a trim. The look is
/// cheap (`/proc/self/status`, and `mallinfo2` walking the bins' heads); the trim, which madvises
/// every free page, runs only when that much is resident and free, off the event loops. The
/// threshold is low because between trims the free pool's pages come back into use one by one:
/// with a trim only past 64 MiB free, `RssAnon` rose by tens of MiB over a run whose heap in use
/// stayed flat. A trim takes
/// 2 to 5 ms for 10 to 20 MiB, up to about 25 ms after a 100,000-member library's models are let
/// go (`Benchmarks/memory.py`'s mixed run: one every 5 s or so). When a large library's models are
/// let go (`LiveHub.LargeDrops`) it also looks 0.1 s later, not up to `interval` later.
final class HeapTrimmer: Sendable {
    /// Resident free bytes past which a trim runs.
    static let threshold = 8 << 20
    /// A library whose models, let go, are worth a look at once: 10,000 members held about
    /// 8 MiB (`Benchmarks/memory.py`: 80 MiB for 100,000), as much as `threshold`.
    static let largeLibrary = 10_000
    /// Trims run since start, for `/metrics`.
    let trims = Atomic<Int>(0)
    private let queue = DispatchQueue(label: "heap-trimmer", qos: .utility)
    private let interval: DispatchTimeInterval

    /// Starts looking every `interval`, for as long as the process runs.
    init(every interval: DispatchTimeInterval = .seconds(5)) {
        self.interval = interval
        scheduleLook()
    }

    /// Anonymous memory resident but not handed out by malloc: its free pool's resident pages.
    static var residentFree: Int {
        MemoryReadings.resident().anon - MemoryReadings.heapInUse
    }

    /// Looks once more, shortly: after a burst of frees the server knows of (a large library's
    /// models let go), so that what they held goes back now rather than at the next look. Until
    /// then, a new load could take those pages in use again, and memory would not show what the
    /// server holds for up to `interval`.
    func lookSoon() {
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { self.look() }
    }

    private func scheduleLook() {
        queue.asyncAfter(deadline: .now() + interval) {
            self.look()
            self.scheduleLook()
        }
    }

    private func look() {
        if Self.residentFree > Self.threshold && MemoryReadings.heapFree > Self.threshold {
            csys_malloc_trim()
            trims.add(1, ordering: .relaxed)
        }
    }
}
