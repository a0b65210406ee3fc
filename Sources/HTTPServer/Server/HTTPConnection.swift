import CSystemLinux
import Glibc

/// One client connection, owned by one event loop and touched only on its thread.
///
/// Requests are answered one at a time, in order: after a request is parsed, nothing more is parsed
/// until its response has been fully sent. That serves pipelining correctly and bounds the memory a
/// client that does not read can make the server hold.
final class HTTPConnection: EventHandler {
    let fd: Int32
    let id: UInt64
    private unowned let loop: EventLoop
    private let server: ServerContext
    private var parser: HTTPRequestParser
    private var input: [UInt8] = []
    private var inputIndex = 0
    private var output: [UInt8] = []
    private var outputIndex = 0

    /// The phase, the deadline and what follows the output: the rules, apart from the socket.
    private var state: HTTPConnectionState
    /// `processInput` is on the stack; a response sent synchronously from the responder must not
    /// parse the next request from inside it.
    private var processing = false
    private var onStreamClose: (@Sendable () -> Void)?
    private var streamProgress: StreamProgress?
    /// Whether the client has gone, for responders on other threads (`HTTPResponseWriter.peerHasGone`).
    private let peer = PeerState()
    private var streamWrites = 0
    private var drainCallbacks: [@Sendable () -> Void] = []

    init(fd: Int32, id: UInt64, loop: EventLoop, server: ServerContext) {
        self.fd = fd
        self.id = id
        self.loop = loop
        self.server = server
        self.parser = HTTPRequestParser(limits: server.configuration.limits)
        self.state = HTTPConnectionState(now: server.clock(), timeouts: server.timeouts)
    }

    /// Entry points run on the loop's thread only (checked in debug builds).
    private func assertOnLoop() {
        assert(loop.isCurrent, "connection \(id) touched off its loop's thread")
    }

    private var hasPendingOutput: Bool { outputIndex < output.count }

    // MARK: Events

    func handle(events: UInt32) {
        assertOnLoop()
        if events & csys_epollerr() != 0 {
            close()
            return
        }
        if events & csys_epollout() != 0, hasPendingOutput {
            flush()
            // Pipelined requests waited for this answer to leave; go on with them.
            if state.isReading, !hasPendingOutput { processInput() }
        }
        if events & (csys_epollin() | csys_epollrdhup() | csys_epollhup()) != 0 {
            readAvailable(hangUp: events & (csys_epollrdhup() | csys_epollhup()) != 0)
        }
    }

    func tick(now: UInt64) {
        assertOnLoop()
        switch state.tick(now: now) {
        case .none: break
        case .close: close()
        case .requestTimedOut: fail(HTTPParseError(.requestTimeout, "The request was not received in time."))
        }
    }

    func drain() {
        assertOnLoop()
        switch state.drain(idle: parser.isIdle && inputIndex == input.count && !hasPendingOutput) {
        case .none: break
        case .close: close()
        case .finishStream: finishStream()
        }
    }

    func forceClose() {
        assertOnLoop()
        close()
    }

    // MARK: Reading

    /// Reads what the socket has, then acts on it. `hangUp`: the peer has shut down its side, so
    /// read on to the end of the stream (with edge-triggered epoll no later event would tell).
    private func readAvailable(hangUp: Bool = false) {
        if state.isClosed { return }
        guard receive(toEndOfStream: hangUp) else { return }
        switch state.afterRead() {
        case .process: processInput()
        case .close: close()
        case .wait: break
        }
    }

    /// Moves bytes from the socket into `input`; false when the connection failed (and closed).
    private func receive(toEndOfStream: Bool) -> Bool {
        let scratchSize = loop.scratch.count
        while true {
            if input.count - inputIndex > server.maxBufferedInput {
                // A client sending far ahead of our answers waits (the kernel buffer holds it back);
                // processInput reads on once the buffered requests are answered.
                state.inputPaused(hangUp: toEndOfStream)
                return true
            }
            let count = loop.scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, scratchSize, 0) }
            if count > 0 {
                // An event-stream client has nothing to say, a refused one is only drained.
                if state.keepsInput { input.append(contentsOf: loop.scratch[0..<count]) }
                // A short read drained the socket; the next bytes raise a new edge.
                if count < scratchSize && !toEndOfStream { return true }
            } else if count == 0 {
                state.peerEnded()
                peer.gone.store(true, ordering: .relaxed)
                return true
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return true
            } else {
                close()
                return false
            }
        }
    }

    private func processInput() {
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while state.isReading, !hasPendingOutput {
            let event: HTTPRequestParser.Event
            do {
                event = try parser.parse(input, at: &inputIndex)
            } catch {
                fail(error)
                return
            }
            switch event {
            case .needMore:
                compactInput()
                if let hangUp = state.resumeInput() {
                    let buffered = input.count
                    guard receive(toEndOfStream: hangUp) else { return }
                    if input.count > buffered { continue }
                }
                if state.needInput(atBoundary: parser.isIdle && inputIndex == input.count, now: server.clock()) {
                    close()
                }
                return
            case .expectsContinue(let head):
                if answeredBeforeBody(head) { return }
                // A client that already sends its body is not waiting (RFC 9110 §10.1.1).
                if inputIndex == input.count {
                    output.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
                    flush()
                }
            case .request(let request):
                state.requestReceived(
                    .init(isHead: request.method == "HEAD", keepAlive: request.keepAlive, version: request.version))
                server.responder.respond(
                    to: request,
                    writer: HTTPResponseWriter(loop: loop, fd: fd, connectionID: id, peer: peer)
                )
            }
        }
    }

    private func compactInput() {
        if inputIndex == input.count {
            input.removeAll(keepingCapacity: input.capacity <= 64 * 1024)
            inputIndex = 0
        } else if inputIndex > 64 * 1024 {
            input.removeFirst(inputIndex)
            inputIndex = 0
        }
    }

    /// Lets the responder judge a head before the client sends the body it holds back for
    /// `100 Continue`. When it answers (a 401, 404, 405 or 415, say), the body is never read: the
    /// connection closes after the answer. Returns whether it answered.
    private func answeredBeforeBody(_ head: HTTPRequest) -> Bool {
        let requestDeadline = state.judgeBeforeBody(
            .init(isHead: head.method == "HEAD", keepAlive: false, version: head.version))
        let writer = HTTPResponseWriter(loop: loop, fd: fd, connectionID: id, peer: peer)
        if server.responder.respondBeforeBody(to: head, writer: writer) { return true }
        state.readBody(restoring: requestDeadline)
        return false
    }

    /// Answers a request the server cannot take, then closes.
    private func fail(_ error: HTTPParseError) {
        guard state.refuse() != nil else { return close() }
        respond(server.responder.errorResponse(status: error.status, detail: error.detail))
    }

    // MARK: Writing

    /// Sends the response to the request in flight.
    func respond(_ response: HTTPResponse) {
        assertOnLoop()
        guard let (request, keepAlive) = state.responseArrived() else { return }  // the client has gone
        writeHead(response, version: request.version, keepAlive: keepAlive, contentLength: response.body.count)
        if !request.isHead && !response.status.forbidsBody {
            output.append(contentsOf: response.body)
        }
        flush()
        if state.isReading, !hasPendingOutput { processInput() }
    }

    func startStream(_ head: HTTPResponse, progress: StreamProgress, onClose: @escaping @Sendable () -> Void) {
        assertOnLoop()
        guard let (request, chunked, keepAlive, finishNow) = state.streamStarted() else { return onClose() }  // gone
        var head = head
        if chunked { head.headers.set("Transfer-Encoding", "chunked") }
        writeHead(head, version: request.version, keepAlive: keepAlive, contentLength: nil)
        // A small kernel buffer per stream bounds the kernel memory of many idle subscribers, and
        // makes a slow reader visible soon, so the producer coalesces instead of queueing.
        var bufferSize = Int32(server.configuration.streamSendBuffer)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        onStreamClose = onClose
        streamProgress = progress
        flush()
        if finishNow { finishStream() }
    }

    func writeStream(_ bytes: [UInt8]) {
        assertOnLoop()
        streamWrites += 1
        guard let chunked = state.streamAccepts(), !bytes.isEmpty else { return }
        if hasPendingOutput && output.count - outputIndex > server.configuration.maxStreamBacklog {
            return close()  // the client stopped reading; it can reconnect and resume
        }
        if chunked {
            // The chunk size in hex, without making a String of it.
            let digits = (Int.bitWidth - bytes.count.leadingZeroBitCount + 3) / 4
            for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                let digit = UInt8((bytes.count >> shift) & 0xF)
                output.append(digit < 10 ? 48 + digit : 87 + digit)
            }
            output.append(13)
            output.append(10)
        }
        output.append(contentsOf: bytes)
        if chunked {
            output.append(13)
            output.append(10)
        }
        flush()
    }

    func setSendBuffer(_ bytes: Int) {
        assertOnLoop()
        var size = Int32(clamping: bytes)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    func whenStreamDrained(_ callback: @escaping @Sendable () -> Void) {
        assertOnLoop()
        guard case .streaming = state.phase else { return }
        if hasPendingOutput { drainCallbacks.append(callback) } else { callback() }
    }

    func finishStream() {
        assertOnLoop()
        guard let chunked = state.finishStream() else { return }
        if chunked { output.append(contentsOf: "0\r\n\r\n".utf8) }
        flush()
    }

    private func writeHead(_ response: HTTPResponse, version: HTTPVersion, keepAlive: Bool, contentLength: Int?) {
        output.append(contentsOf: "HTTP/1.1 ".utf8)
        output.append(contentsOf: String(response.status.code).utf8)
        output.append(32)
        output.append(contentsOf: response.status.reason.utf8)
        output.append(contentsOf: "\r\nDate: ".utf8)
        output.append(contentsOf: loop.dateHeader.bytes)
        output.append(13)
        output.append(10)
        for (name, value) in response.headers {
            output.append(contentsOf: name.utf8)
            output.append(58)
            output.append(32)
            // A CR or LF in a value would let it forge headers; drop them.
            if value.utf8.contains(where: { $0 == 13 || $0 == 10 }) {
                output.append(contentsOf: value.utf8.lazy.filter { $0 != 13 && $0 != 10 })
            } else {
                output.append(contentsOf: value.utf8)
            }
            output.append(13)
            output.append(10)
        }
        if let contentLength, !response.status.forbidsBody {
            output.append(contentsOf: "Content-Length: ".utf8)
            output.append(contentsOf: String(contentLength).utf8)
            output.append(13)
            output.append(10)
        }
        if !keepAlive {
            output.append(contentsOf: "Connection: close\r\n".utf8)
        } else if version == .http1_0 {
            output.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
        output.append(13)
        output.append(10)
    }

    private func flush() {
        var progressed = false
        while hasPendingOutput {
            let remaining = output.count - outputIndex
            let sent = output.withUnsafeBytes {
                send(fd, $0.baseAddress! + outputIndex, remaining, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                outputIndex += sent
                progressed = true
            } else if sent < 0 && errno == EINTR {
                continue
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                state.outputBlocked(progressed: progressed, now: server.clock())
                return
            } else {
                close()
                return
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 64 * 1024)
        outputIndex = 0
        let next = state.outputSent(now: server.clock())
        if let streamProgress {
            streamProgress.sent.store(streamWrites, ordering: .relaxed)
            if !drainCallbacks.isEmpty {
                let callbacks = drainCallbacks
                drainCallbacks = []
                callbacks.forEach { $0() }
            }
        }
        switch next {
        case .none:
            break
        case .linger:
            input = []
            inputIndex = 0
            shutdown(fd, Int32(SHUT_WR))
            readAvailable()
        case .close:
            close()
        }
    }

    private func close() {
        guard state.close() else { return }
        peer.gone.store(true, ordering: .relaxed)
        loop.deregister(fd)
        Glibc.close(fd)
        server.connectionClosed(on: loop)
        input = []
        output = []
        drainCallbacks = []
        if let onStreamClose {
            self.onStreamClose = nil
            onStreamClose()
        }
    }
}
