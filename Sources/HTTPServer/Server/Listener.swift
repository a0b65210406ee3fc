import CSystemLinux
import Glibc

/// The listening socket as seen by one loop. Every loop registers the same socket with
/// `EPOLLEXCLUSIVE`, so the kernel wakes one loop per incoming connection and the loops share the
/// accepting without handing connections between threads.
final class Listener: EventHandler {
    private let fd: Int32
    private unowned let loop: EventLoop
    private let server: ServerContext
    private var registered = true

    init(fd: Int32, loop: EventLoop, server: ServerContext) {
        self.fd = fd
        self.loop = loop
        self.server = server
    }

    func handle(events: UInt32) {
        for _ in 0..<64 {
            guard let client = Socket.accept(fd) else { return }
            server.accepted(client, on: loop)
        }
    }

    func tick(now: UInt64) {}

    func drain() {
        guard registered else { return }
        registered = false
        loop.deregister(fd)
    }

    func forceClose() {
        drain()
    }
}
