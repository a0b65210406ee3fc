import CSystemLinux
import Dispatch
import Synchronization

/// Gives memory freed after a burst back to the system.
///
/// glibc returns freed memory by itself only from the top of a heap; what a burst of streams, a
/// deep resume or a large snapshot freed in the middle stays resident (issue "hardening III": 3,000
/// abandoned streams left 543 MiB that `malloc_trim(0)` brought back to 35 MiB). Every few seconds
/// this looks at how much the heap holds free, and past `threshold` trims it. The look is cheap
/// (`mallinfo2` walks the bins' heads); the trim, which madvises every free page, runs only after a
/// burst, off the event loops.
final class HeapTrimmer: Sendable {
    /// Free heap bytes past which a trim runs.
    static let threshold = 64 << 20
    /// Trims run since start, for `/metrics`.
    let trims = Atomic<Int>(0)
    private let queue = DispatchQueue(label: "heap-trimmer", qos: .utility)
    private let interval: DispatchTimeInterval

    /// Starts looking every `interval`, for as long as the process runs.
    init(every interval: DispatchTimeInterval = .seconds(5)) {
        self.interval = interval
        scheduleLook()
    }

    private func scheduleLook() {
        queue.asyncAfter(deadline: .now() + interval) {
            if csys_heap_free_bytes() > Self.threshold {
                csys_malloc_trim()
                self.trims.add(1, ordering: .relaxed)
            }
            self.scheduleLook()
        }
    }
}
