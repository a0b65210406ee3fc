import CSystemLinux
import Foundation
import Synchronization

/// An HTTP/1.1 server on non-blocking sockets: one epoll loop per core, no thread per connection.
package final class HTTPServer: Sendable {
    private let context: ServerContext
    private let loops: [EventLoop]
    private let listenerFDs = Mutex<[Int32]>([])
    private let round = Atomic<Int>(0)
    private let loopsStarted = Mutex(false)

    /// Open connections past which new ones get a 503: the configured cap, or fewer when the
    /// open-file limit (its soft value raised to the hard one) could not hold that many.
    package let maxConnections: Int
    /// The open-file limit in force (`RLIMIT_NOFILE`).
    package let descriptorLimit: Int

    package init(configuration: HTTPServerConfiguration, responder: any HTTPResponder) {
        // A cap the open-file limit cannot hold would end in accept failing with EMFILE; refusing
        // with a 503 at the cap is the better answer.
        descriptorLimit = Socket.raiseDescriptorLimit()
        var configuration = configuration
        configuration.maxConnections = configuration.connectionCap(descriptorLimit: descriptorLimit)
        maxConnections = configuration.maxConnections
        context = ServerContext(responder: responder, configuration: configuration)
        loops = (0..<max(1, configuration.loopCount)).map { _ in EventLoop() }
    }

    /// Connections open now.
    package var openConnections: Int { context.openConnections.load(ordering: .relaxed) }

    /// Connections open now on each event loop, by loop index.
    package var openConnectionsPerLoop: [Int] { loops.map { $0.openConnections.load(ordering: .relaxed) } }

    /// Starts the loops, then binds and listens; returns the port bound.
    ///
    /// Each loop gets a listening socket of its own on the same port (`SO_REUSEPORT`), and the
    /// kernel spreads connections over them by their addresses. One socket shared by every loop
    /// let whichever loop woke first accept a whole burst, so one client's connections often all
    /// landed on one loop while the other idled.
    @discardableResult
    package func start() throws(SocketError) -> Int {
        Socket.prepareProcess()
        let host = context.configuration.host
        let (first, port) = try Socket.listen(host: host, port: context.configuration.port, reusePort: true)
        var fds = [first]
        while fds.count < loops.count {
            do {
                fds.append(try Socket.listen(host: host, port: port, reusePort: true).fd)
            } catch {
                fds.forEach { close($0) }
                throw error
            }
        }
        listenerFDs.withLock { $0 = fds }
        startLoops()
        for (loop, fd) in zip(loops, fds) {
            let context = context
            loop.execute { loop.register(fd, Listener(fd: fd, loop: loop, server: context), events: Listener.events) }
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
        listenerFDs.withLock { fds in
            fds.forEach { close($0) }
            fds = []
        }
    }
}
