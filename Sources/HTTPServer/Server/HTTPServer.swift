import CSystemLinux
import Foundation
import Synchronization

/// An HTTP/1.1 server on non-blocking sockets: one epoll loop per core, no thread per connection.
package final class HTTPServer: Sendable {
    private let context: ServerContext
    private let loops: [EventLoop]
    private let listenerFD = Mutex<Int32?>(nil)
    private let round = Atomic<Int>(0)
    private let loopsStarted = Mutex(false)

    package init(configuration: HTTPServerConfiguration, responder: any HTTPResponder) {
        context = ServerContext(responder: responder, configuration: configuration)
        loops = (0..<max(1, configuration.loopCount)).map { _ in EventLoop() }
    }

    /// Connections open now.
    package var openConnections: Int { context.openConnections.load(ordering: .relaxed) }

    /// Starts the loops, then binds and listens; returns the port bound.
    @discardableResult
    package func start() throws(SocketError) -> Int {
        Socket.prepareProcess()
        let (fd, port) = try Socket.listen(host: context.configuration.host, port: context.configuration.port)
        listenerFD.withLock { $0 = fd }
        startLoops()
        for loop in loops {
            let context = context
            loop.execute {
                loop.register(
                    fd, Listener(fd: fd, loop: loop, server: context), events: csys_epollin() | csys_epollexclusive())
            }
        }
        return port
    }

    private func startLoops() {
        loopsStarted.withLock { started in
            guard !started else { return }
            started = true
            for (index, loop) in loops.enumerated() {
                let thread = Thread {
                    LoopThread.enter(index)
                    loop.run()
                }
                thread.name = "http-loop-\(index)"
                thread.start()
            }
        }
    }

    /// Serves an already-connected socket, as if accepted (tests drive connections over a socketpair).
    package func adopt(_ fd: Int32) {
        Socket.setNonBlocking(fd)
        startLoops()
        let loop = loops[round.add(1, ordering: .relaxed).oldValue % loops.count]
        let context = context
        loop.execute { context.accepted(fd, on: loop) }
    }

    /// Stops accepting, lets requests in flight finish and streams end (waiting at most `grace`
    /// seconds), then closes whatever is left and stops the loops. Blocks until done.
    package func shutdown(grace: Double = 10) {
        guard loopsStarted.withLock({ $0 }) else { return }
        loops.forEach { $0.drain() }
        let deadline = Date().addingTimeInterval(grace)
        while openConnections > 0 && Date() < deadline {
            usleep(20_000)
        }
        loops.forEach { $0.stop() }
        loops.forEach { $0.waitUntilStopped() }
        listenerFD.withLock { fd in
            if let descriptor = fd { close(descriptor) }
            fd = nil
        }
    }
}
