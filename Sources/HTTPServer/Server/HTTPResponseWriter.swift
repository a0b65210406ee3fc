import Synchronization

/// Sends the response to one request; a handle that may cross threads.
///
/// It names the connection by descriptor and a unique id, so a response that arrives after the
/// connection closed (or its descriptor was reused) is dropped instead of going astray.
package struct HTTPResponseWriter: Sendable {
    let loop: EventLoop
    let fd: Int32
    let connectionID: UInt64
    let peer: PeerState

    init(loop: EventLoop, fd: Int32, connectionID: UInt64, peer: PeerState) {
        self.loop = loop
        self.fd = fd
        self.connectionID = connectionID
        self.peer = peer
    }

    /// Whether the client has ended its side of the connection, or the connection is closed.
    /// Readable on any thread. A plain response is still sent after a half-close (a client may
    /// shut down its side after its last request); a responder about to open an event stream, or
    /// to do work only such a stream would use, gives up instead (`abandon`).
    package var peerHasGone: Bool { peer.gone.load(ordering: .relaxed) }

    /// Closes the connection without an answer: for a request whose client is gone.
    package func abandon() {
        let (loop, fd, id) = (loop, fd, connectionID)
        let close: @Sendable () -> Void = { loop.connection(fd, id)?.forceClose() }
        if loop.isCurrent { close() } else { loop.execute(close) }
    }

    /// Sends a complete response.
    package func send(_ response: HTTPResponse) {
        if loop.isCurrent {
            loop.connection(fd, connectionID)?.respond(response)
        } else {
            let (loop, fd, id) = (loop, fd, connectionID)
            loop.execute { loop.connection(fd, id)?.respond(response) }
        }
    }

    /// Logs one line, `<timestamp> ` then what `appendRest` writes, to stderr: into the loop's
    /// buffer, written once per loop turn (dropped and counted in `LogSink.dropped` when stderr's
    /// reader has no room). Off the loop thread the line is written at once.
    package func log(_ appendRest: (inout [UInt8]) -> Void) {
        if loop.isCurrent {
            loop.logBuffer.append(to: .standardError, appendRest)
        } else {
            var buffer = LogBuffer(capacity: 256)
            buffer.append(to: .standardError, appendRest)
            buffer.flush(to: .standardError)
        }
    }

    /// Runs `body` on the connection's event-loop thread: at once when called there, else soon.
    package func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.isCurrent { body() } else { loop.execute(body) }
    }

    /// Sends `head` (status and headers) and keeps the connection open for `HTTPStream.write`.
    ///
    /// `onClose` runs once, on the loop thread, when the stream ends for any reason: the client
    /// went away, the stream was finished, or the server is stopping.
    package func stream(_ head: HTTPResponse, onClose: @escaping @Sendable () -> Void) -> HTTPStream {
        let (loop, fd, id) = (loop, fd, connectionID)
        let progress = StreamProgress()
        let start: @Sendable () -> Void = {
            guard let connection = loop.connection(fd, id) else { return onClose() }
            connection.startStream(head, progress: progress, onClose: onClose)
        }
        if loop.isCurrent { start() } else { loop.execute(start) }
        return HTTPStream(loop: loop, fd: fd, connectionID: id, progress: progress)
    }
}

/// The open body of a streamed response (server-sent events).
package struct HTTPStream: Sendable {
    let loop: EventLoop
    let fd: Int32
    let connectionID: UInt64
    let progress: StreamProgress

    /// Appends bytes to the stream; dropped silently once the stream has ended.
    package func write(_ bytes: [UInt8]) {
        progress.posted.add(1, ordering: .relaxed)
        if loop.isCurrent {
            loop.connection(fd, connectionID)?.writeStream(bytes)
        } else {
            loop.executeStreamWrite(fd: fd, connectionID: connectionID, bytes: bytes)
        }
    }

    /// Writes not yet handed to the kernel. Producers hold back (and coalesce) when it grows,
    /// instead of queueing without bound for a slow reader.
    package var backlog: Int {
        progress.posted.load(ordering: .relaxed) - progress.sent.load(ordering: .relaxed)
    }

    /// Calls `callback` on the loop thread once what is queued has been sent (at once if it has).
    /// Never called if the stream ends first.
    package func whenDrained(_ callback: @escaping @Sendable () -> Void) {
        run { $0.whenStreamDrained(callback) }
    }

    /// Sets the socket's send buffer. Streams start with a small one, so a reader that stops
    /// reading shows at once as a backlog; one large write (a big snapshot) goes much faster with a
    /// large one: on loopback, writes smaller than a segment wait for delayed acknowledgements.
    package func setSendBuffer(_ bytes: Int) {
        run { $0.setSendBuffer(bytes) }
    }

    /// Ends the stream and closes the connection once everything written has been sent.
    package func finish() {
        run { $0.finishStream() }
    }

    private func run(_ body: @escaping @Sendable (HTTPConnection) -> Void) {
        let (loop, fd, id) = (loop, fd, connectionID)
        if loop.isCurrent {
            loop.connection(fd, id).map(body)
        } else {
            loop.execute { loop.connection(fd, id).map(body) }
        }
    }
}

extension EventLoop {
    /// The live connection registered for `fd` with this id, if it is still open. Loop thread only.
    func connection(_ fd: Int32, _ id: UInt64) -> HTTPConnection? {
        guard let connection = handler(for: fd) as? HTTPConnection, connection.id == id else { return nil }
        return connection
    }
}

/// What a connection's handlers on other threads may learn of its client: whether it has gone.
final class PeerState: Sendable {
    let gone = Atomic<Bool>(false)
}

/// How far a stream's writes have got: counted by the producer when posted, by the loop once sent.
final class StreamProgress: Sendable {
    let posted = Atomic<Int>(0)
    let sent = Atomic<Int>(0)
}
