import CSystemLinux
import Synchronization

/// Makes a thread's heap grow a whole mapping at a time while a large library loads (`members`).
///
/// glibc gives each arena heaps of 64 MiB of address space, made writable as they fill: a new heap
/// `M_TOP_PAD` (128 KiB) past what was asked, then a page at a time, one `mprotect` per page, each
/// of which takes the address space's lock that every thread's page faults wait on. A load of a
/// million members allocates about 800 MiB on two threads: 200,000 of those calls, a fifth of the
/// load's CPU (`perf`: `__mprotect` under `sysmalloc`). While such a load runs, the pad is the
/// whole heap, so each new heap is made writable once; pages are still resident only once written.
/// The pad is process-wide, and it is put back when the last load ends, because glibc also keeps
/// that much free at the top of a heap when it trims (a part `malloc_trim`, the heap trimmer, does
/// not reach) and deletes no heap meanwhile: what other threads free during a load stays resident
/// until a later free there trims it (and the main heap grows by 64 MiB of address space at a
/// time, as does every new heap, which counts against the commit limit if overcommit is strict).
/// First joins of 1,000,000 books, alternating fresh servers: 1.04 to 1.09 s against 1.19 to
/// 1.25 s, the server's CPU 1.58 to 1.67 s against 1.96 to 2.06 s. With the pad set for the whole
/// run they were 0.05 s faster still (the heaps made before the load grew a page at a time), at
/// the cost of up to 64 MiB kept resident at the top of each arena's heap for good.
final class HeapGrowth: Sendable {
    /// Members from which a library's load is large: about 160 MiB of records and models, two
    /// and a half heaps. A smaller one gains little (100,000 members load in about 0.1 s) and would
    /// hold the pad up often, every time a busy server loads one of its libraries again.
    static let members = 200_000
    /// A heap's size on 64-bit glibc (`HEAP_MAX_SIZE`): a pad this large makes a new heap writable whole.
    static let largePad: Int32 = 64 << 20
    /// glibc's default (`DEFAULT_TOP_PAD`, mallopt(3)).
    static let defaultPad: Int32 = 128 << 10
    /// Large loads under way.
    private let loads = Mutex(0)

    /// A large load started (true) or ended (false).
    func load(started: Bool) {
        loads.withLock { count in
            count += started ? 1 : -1
            if started && count == 1 { csys_malloc_top_pad(Self.largePad) }
            if !started && count == 0 { csys_malloc_top_pad(Self.defaultPad) }
        }
    }
}
