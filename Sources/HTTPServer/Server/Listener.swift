import CSystemLinux
import Glibc

/// One loop's listening socket. Every loop has its own on the same port (`SO_REUSEPORT`), so the
/// kernel spreads connections over the loops and none is handed between threads.
///
/// Out of file descriptors, `accept` fails and leaves the connection queued, and the level-triggered
/// socket would wake the loop again at once, for ever. So each listener keeps one spare descriptor:
/// it closes it, accepts one connection, answers 503 and closes, then takes the spare back (the classic trick of
/// libev and nginx). When even the spare cannot be had again, the listener stops polling until the
/// next tick (about a second) instead of spinning.
final class Listener: EventHandler {
    private enum State {
        case listening
        /// Out of descriptors and without a spare: not polled until `tick` sees this time passed.
        case pausedUntil(UInt64)
        case stopped
    }

    static let events = csys_epollin()

    private let fd: Int32
    private unowned let loop: EventLoop
    private let server: ServerContext
    private var state = State.listening
    private var spare: Int32 = Listener.openSpare()

    init(fd: Int32, loop: EventLoop, server: ServerContext) {
        self.fd = fd
        self.loop = loop
        self.server = server
    }

    func handle(events: UInt32) {
        for _ in 0..<64 {
            switch Socket.accept(fd) {
            case .connection(let client):
                server.accepted(client, on: loop)
            case .none:
                return
            case .outOfDescriptors:
                guard shedOneWithSpare() else { return }
            }
        }
    }

    /// Turns away the connection that waits with a 503, using the spare descriptor's slot; pauses
    /// without one. Returns whether to go on accepting.
    ///
    /// One at a time: each next connection is first tried with a plain `accept`, so one that comes
    /// in after descriptors were freed is served, not refused because a moment ago none were left.
    private func shedOneWithSpare() -> Bool {
        guard spare >= 0 else {
            pause()
            return false
        }
        Glibc.close(spare)
        spare = -1
        let accepted = Socket.accept(fd)
        if case .connection(let client) = accepted { server.refuse(client) }
        spare = Self.openSpare()
        guard spare >= 0 else {
            pause()
            return false
        }
        if case .connection = accepted { return true }
        return false
    }

    private func pause() {
        guard case .listening = state else { return }
        state = .pausedUntil(monotonicMilliseconds() + 1_000)
        loop.unwatch(fd)
    }

    func tick(now: UInt64) {
        guard case .pausedUntil(let time) = state, now >= time else { return }
        if spare < 0 { spare = Self.openSpare() }
        state = .listening
        loop.watch(fd, events: Self.events)
    }

    func drain() {
        if case .stopped = state { return }
        state = .stopped
        loop.deregister(fd)
        if spare >= 0 {
            Glibc.close(spare)
            spare = -1
        }
    }

    func forceClose() {
        drain()
    }

    private static func openSpare() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
}
