import CSystemLinux
import Glibc
import Synchronization

/// What every connection of one server shares: the responder, the limits and the counters.
final class ServerContext: Sendable {
    let responder: any HTTPResponder
    let configuration: HTTPServerConfiguration
    let openConnections = Atomic<Int>(0)
    private let nextID = Atomic<UInt64>(1)

    /// Input a connection may buffer beyond the request being answered (pipelined requests).
    var maxBufferedInput: Int { configuration.limits.maxHeadSize + configuration.limits.maxBodySize + 64 * 1024 }

    /// Milliseconds of a monotonic clock: what connections' deadlines are measured in.
    let clock: @Sendable () -> UInt64
    /// The connections' timeouts, from the configuration.
    let timeouts: HTTPConnectionState.Timeouts

    init(
        responder: any HTTPResponder, configuration: HTTPServerConfiguration,
        clock: @escaping @Sendable () -> UInt64 = monotonicMilliseconds
    ) {
        self.responder = responder
        self.configuration = configuration
        self.clock = clock
        timeouts = HTTPConnectionState.Timeouts(
            idle: configuration.idleTimeout, request: configuration.requestTimeout, write: configuration.writeTimeout)
    }

    /// Takes a freshly accepted socket onto `loop`, or turns it away when the server is full.
    func accepted(_ fd: Int32, on loop: EventLoop) {
        guard openConnections.add(1, ordering: .relaxed).newValue <= configuration.maxConnections else {
            openConnections.subtract(1, ordering: .relaxed)
            refuse(fd)
            return
        }
        loop.openConnections.add(1, ordering: .relaxed)
        let id = nextID.add(1, ordering: .relaxed).oldValue
        let connection = HTTPConnection(fd: fd, id: id, loop: loop, server: self)
        loop.register(fd, connection, events: csys_connection_events())
    }

    func connectionClosed(on loop: EventLoop) {
        openConnections.subtract(1, ordering: .relaxed)
        loop.openConnections.subtract(1, ordering: .relaxed)
    }

    /// A best-effort 503 for a connection over the limit (or past the open-file limit); the socket
    /// is closed right after.
    func refuse(_ fd: Int32) {
        var response = responder.errorResponse(
            status: .serviceUnavailable,
            detail: "The server has too many open connections; retry shortly."
        )
        response.headers.set("Retry-After", "1")
        var bytes = Array("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n".utf8)
        for (name, value) in response.headers { bytes += Array("\(name): \(value)\r\n".utf8) }
        bytes += Array("Content-Length: \(response.body.count)\r\n\r\n".utf8) + response.body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(fd)
    }
}

/// Edge-triggered read, write and hang-up events: each connection is registered once, for good.
func csys_connection_events() -> UInt32 {
    csys_epollin() | csys_epollout() | csys_epollrdhup() | csys_epollet()
}
