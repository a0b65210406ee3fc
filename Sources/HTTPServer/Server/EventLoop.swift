import CSystemLinux
import Glibc
import Synchronization

/// Something registered with an event loop for one file descriptor.
///
/// Every method is called on the loop's own thread.
protocol EventHandler: AnyObject {
    /// The descriptor became readable, writable, or failed (`events` are epoll flags).
    func handle(events: UInt32)
    /// Called about once a second, with the monotonic time in milliseconds, to expire timeouts.
    func tick(now: UInt64)
    /// The server is stopping: finish what is in flight, accept nothing new.
    func drain()
    /// The server is stopping now: release everything.
    func forceClose()
}

/// One thread running an epoll loop.
///
/// Descriptors are registered once (edge-triggered for connections). Other threads hand work to the
/// loop with `execute`, which queues a closure and wakes the loop through an eventfd.
final class EventLoop: @unchecked Sendable {  // handler state is touched only on the loop thread; `tasks` is a Mutex
    private let epoll: Int32
    private let wakeFD: Int32
    /// Work handed to the loop by other threads, in order.
    ///
    /// `streamWrite` comes first on purpose: Swift keeps a multi-payload enum's case in spare bits
    /// of its payloads, here the high bits of the bytes' pointer, and only the first case leaves
    /// them clear. Second, a write still queued when the process exits would hold its bytes through
    /// a pointer LeakSanitizer cannot read, and be reported as leaked (`EventLoopTaskTests`).
    enum Task: Sendable {
        /// Bytes for a stream's connection (`HTTPStream.write`): the commonest task by far (one
        /// per subscriber and event), queued as a value, with no closure to allocate.
        case streamWrite(fd: Int32, connectionID: UInt64, bytes: [UInt8])
        case run(@Sendable () -> Void)
    }

    private let tasks = Mutex<(pending: [Task], woken: Bool)>(([], false))
    private var handlers: [(any EventHandler)?] = []
    private var running = true
    private let threadID = Atomic<UInt>(0)
    private var lastTick: UInt64 = 0
    private let stopped = Mutex(false)
    private let stoppedCondition = Condition()

    /// Client connections this loop serves now.
    let openConnections = Atomic<Int>(0)

    /// Reused by connections of this loop for reads, so each connection needs no read buffer of its own.
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// Access-log lines of this turn, written to stderr when the turn ends. Loop thread only.
    var logBuffer = LogBuffer()
    /// The `Date` header for this second, cached.
    private(set) var dateHeader = HTTPDate()

    init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, csys_efd_flags())
        var event = epoll_event()
        event.events = csys_epollin()
        event.data.fd = wakeFD
        epoll_ctl(epoll, EPOLL_CTL_ADD, wakeFD, &event)
    }

    deinit {
        close(epoll)
        close(wakeFD)
    }

    /// Whether the caller runs on this loop's thread.
    var isCurrent: Bool { threadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs `task` on the loop thread, soon.
    func execute(_ task: @escaping @Sendable () -> Void) {
        enqueue(.run(task))
    }

    /// Writes `bytes` to the stream of connection `id` on `fd` on the loop thread, soon, in order
    /// with the tasks given to `execute`.
    func executeStreamWrite(fd: Int32, connectionID: UInt64, bytes: [UInt8]) {
        enqueue(.streamWrite(fd: fd, connectionID: connectionID, bytes: bytes))
    }

    private func enqueue(_ task: Task) {
        let wake = tasks.withLock { state in
            state.pending.append(task)
            if state.woken { return false }
            state.woken = true
            return true
        }
        if wake {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    /// Registers `handler` for `fd` with the given epoll flags. Loop thread only.
    func register(_ fd: Int32, _ handler: any EventHandler, events: UInt32) {
        let index = Int(fd)
        if index >= handlers.count {
            handlers.append(contentsOf: repeatElement(nil, count: max(index + 1 - handlers.count, handlers.count)))
        }
        handlers[index] = handler
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    /// Forgets `fd`; the caller closes it. Loop thread only.
    func deregister(_ fd: Int32) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        if Int(fd) < handlers.count { handlers[Int(fd)] = nil }
        deregisteredInBatch.append(fd)
    }

    /// The descriptors deregistered while the current batch of events is handled. A later event
    /// of the batch for one of them is stale: the descriptor was closed, and its number may
    /// already belong to a connection accepted meanwhile, which the old connection's error would
    /// otherwise close before its request was read.
    private var deregisteredInBatch: [Int32] = []

    /// Stops waiting for events of `fd` and keeps its handler (which still gets `tick`). Loop thread only.
    func unwatch(_ fd: Int32) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
    }

    /// Waits for events of `fd` again after `unwatch`. Loop thread only.
    func watch(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    /// The handler registered for `fd`. Loop thread only.
    func handler(for fd: Int32) -> (any EventHandler)? {
        Int(fd) < handlers.count ? handlers[Int(fd)] : nil
    }

    /// Every handler now registered, for draining.
    private var activeHandlers: [any EventHandler] { handlers.compactMap { $0 } }

    /// Asks every handler to finish in-flight work and stop.
    func drain() {
        execute { [self] in activeHandlers.forEach { $0.drain() } }
    }

    /// Closes every handler and ends the loop.
    func stop() {
        execute { [self] in
            activeHandlers.forEach { $0.forceClose() }
            running = false
        }
    }

    /// Runs the loop until `stop`; call on the loop's own thread.
    func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        while running {
            let count = epoll_wait(epoll, &events, Int32(events.count), 1000)
            if count < 0 && errno != EINTR { break }
            deregisteredInBatch.removeAll(keepingCapacity: true)
            for index in 0..<max(0, Int(count)) {
                let event = events[index]
                let fd = event.data.fd
                if !deregisteredInBatch.isEmpty && deregisteredInBatch.contains(fd) {
                    continue
                } else if fd == wakeFD {
                    runTasks()
                } else if Int(fd) < handlers.count, let handler = handlers[Int(fd)] {
                    handler.handle(events: event.events)
                }
            }
            let now = monotonicMilliseconds()
            if now &- lastTick >= 1000 {
                lastTick = now
                dateHeader.refresh()
                for handler in activeHandlers { handler.tick(now: now) }
            }
            if !logBuffer.isEmpty { logBuffer.flush(to: .standardError) }
        }
        stopped.withLock { $0 = true }
        stoppedCondition.signal()
    }

    /// Blocks until `run` has returned.
    func waitUntilStopped() {
        stoppedCondition.wait(until: { stopped.withLock { $0 } })
    }

    private func runTasks() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
        let batch = tasks.withLock { state in
            state.woken = false
            return state.pending.swapAndClear()
        }
        for task in batch {
            switch task {
            case .run(let body): body()
            case .streamWrite(let fd, let id, let bytes): connection(fd, id)?.writeStream(bytes)
            }
        }
    }
}

extension Array {
    /// Returns the contents and leaves the array empty.
    fileprivate mutating func swapAndClear() -> [Element] {
        var taken: [Element] = []
        swap(&taken, &self)
        return taken
    }
}

/// A minimal condition variable for waiting on a loop to end.
final class Condition: @unchecked Sendable {  // pthread objects guard themselves
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        pthread_cond_broadcast(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait(until done: () -> Bool) {
        pthread_mutex_lock(&mutex)
        while !done() {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_nsec += 50_000_000
            if deadline.tv_nsec >= 1_000_000_000 {
                deadline.tv_sec += 1
                deadline.tv_nsec -= 1_000_000_000
            }
            pthread_cond_timedwait(&condition, &mutex, &deadline)
        }
        pthread_mutex_unlock(&mutex)
    }
}
