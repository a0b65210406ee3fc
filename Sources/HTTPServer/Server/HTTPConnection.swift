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

    private enum Phase {
        /// Parsing requests (or waiting for output to drain before parsing the next one).
        case reading
        /// A request was handed to the responder; its response has not arrived yet.
        case responding(isHead: Bool, keepAlive: Bool, version: HTTPVersion)
        /// A streamed response is open.
        case streaming(chunked: Bool)
        /// An error response was sent and our side shut down; unread input is drained for a moment
        /// so the kernel does not reset the connection before the client has read the response.
        case lingering
        case closed
    }

    private enum Deadline {
        case none
        /// Waiting for the next request on a kept-alive connection. Blank lines before a request do
        /// not move it (RFC 9112 §2.2 lets a server skip them, not count them as activity).
        case idle(UInt64)
        /// A request has started arriving and must be complete by then.
        case request(UInt64)
        /// Output is waiting for the client to read it; moved on whenever the kernel takes bytes,
        /// so only a client that reads nothing for the write timeout is dropped.
        case write(UInt64)
        /// A lingering close ends by then at the latest.
        case linger(UInt64)
    }

    /// What happens once the output has all been sent.
    private enum AfterFlush {
        case stayOpen
        case close
        /// Shut down our side, drain what the client still sends for a moment, then close: after
        /// an error answered before its request was read in full.
        case lingerThenClose
    }

    /// How far the client's side of the connection has got.
    private enum Inbound: Equatable {
        /// Reading as bytes arrive.
        case open
        /// Reading stopped at `maxBufferedInput` before the socket was drained; it resumes once the
        /// buffered requests are answered. `hangUp`: the client's end of stream is still to be read.
        case paused(hangUp: Bool)
        /// The client shut down its sending side. Every request it sent in full is still answered
        /// (a half-close after pipelined requests is a normal end), then the connection closes.
        case ended
    }

    private var phase = Phase.reading
    private var deadline = Deadline.none
    private var afterFlush = AfterFlush.stayOpen
    private var inbound = Inbound.open
    /// The server is stopping: answer what is in flight, take no new request.
    private var draining = false
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
        // A new connection gets the request timeout, not the keep-alive idle one, to send its
        // first request: opening connections and sending nothing must not hold them longer than
        // sending half a request does.
        let firstRequest = min(server.configuration.idleTimeout, server.configuration.requestTimeout)
        self.deadline = .idle(monotonicMilliseconds() + firstRequest)
    }

    private var hasPendingOutput: Bool { outputIndex < output.count }

    // MARK: Events

    func handle(events: UInt32) {
        if events & csys_epollerr() != 0 {
            close()
            return
        }
        if events & csys_epollout() != 0, hasPendingOutput {
            flush()
            // Pipelined requests waited for this answer to leave; go on with them.
            if case .reading = phase, !hasPendingOutput { processInput() }
        }
        if events & (csys_epollin() | csys_epollrdhup() | csys_epollhup()) != 0 {
            readAvailable(hangUp: events & (csys_epollrdhup() | csys_epollhup()) != 0)
        }
    }

    func tick(now: UInt64) {
        switch deadline {
        case .none:
            return
        case .idle(let time):
            if now >= time { close() }
        case .request(let time):
            if now >= time { fail(HTTPParseError(.requestTimeout, "The request was not received in time.")) }
        case .write(let time), .linger(let time):
            if now >= time { close() }
        }
    }

    func drain() {
        draining = true
        switch phase {
        case .reading where parser.isIdle && inputIndex == input.count && !hasPendingOutput:
            close()
        case .streaming:
            finishStream()
        default:
            break  // the request in flight finishes, then the connection closes
        }
    }

    func forceClose() {
        close()
    }

    // MARK: Reading

    /// Reads what the socket has, then acts on it. `hangUp`: the peer has shut down its side, so
    /// read on to the end of the stream (with edge-triggered epoll no later event would tell).
    private func readAvailable(hangUp: Bool = false) {
        if case .closed = phase { return }
        guard receive(toEndOfStream: hangUp) else { return }
        switch phase {
        case .reading:
            processInput()
        case .streaming where inbound == .ended, .lingering where inbound == .ended:
            close()
        default:
            break  // responding: requests that follow are answered after this one, even after a half-close
        }
    }

    /// Moves bytes from the socket into `input`; false when the connection failed (and closed).
    private func receive(toEndOfStream: Bool) -> Bool {
        let scratchSize = loop.scratch.count
        while true {
            if input.count - inputIndex > server.maxBufferedInput {
                // A client sending far ahead of our answers waits (the kernel buffer holds it back);
                // processInput reads on once the buffered requests are answered.
                inbound = .paused(hangUp: toEndOfStream)
                return true
            }
            let count = loop.scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, scratchSize, 0) }
            if count > 0 {
                switch phase {
                case .streaming, .lingering:
                    break  // an event-stream client has nothing to say, a rejected one is drained
                default:
                    input.append(contentsOf: loop.scratch[0..<count])
                }
                // A short read drained the socket; the next bytes raise a new edge.
                if count < scratchSize && !toEndOfStream { return true }
            } else if count == 0 {
                inbound = .ended
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
        while case .reading = phase, !hasPendingOutput {
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
                if case .paused(let hangUp) = inbound {
                    inbound = .open
                    let buffered = input.count
                    guard receive(toEndOfStream: hangUp) else { return }
                    if input.count > buffered { continue }
                }
                if inbound == .ended {
                    close()  // every request received in full has been answered
                } else if parser.isIdle && inputIndex == input.count {
                    if draining {
                        close()
                    } else if case .none = deadline {
                        // A response has just been sent. Blank lines alone keep the deadline as it is.
                        deadline = .idle(monotonicMilliseconds() + server.configuration.idleTimeout)
                    }
                } else if case .request = deadline {
                    // keep the deadline set when this request began
                } else {
                    deadline = .request(monotonicMilliseconds() + server.configuration.requestTimeout)
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
                deadline = .none
                phase = .responding(
                    isHead: request.method == "HEAD", keepAlive: request.keepAlive, version: request.version)
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
        phase = .responding(isHead: head.method == "HEAD", keepAlive: false, version: head.version)
        afterFlush = .lingerThenClose
        let requestDeadline = deadline
        deadline = .none  // an answer sent at once sets the linger deadline; the responder always answers
        let writer = HTTPResponseWriter(loop: loop, fd: fd, connectionID: id, peer: peer)
        if server.responder.respondBeforeBody(to: head, writer: writer) { return true }
        phase = .reading
        afterFlush = .stayOpen
        deadline = requestDeadline
        return false
    }

    /// Answers a request the server cannot take, then closes.
    private func fail(_ error: HTTPParseError) {
        guard case .reading = phase else { return close() }
        phase = .responding(isHead: false, keepAlive: false, version: .http1_1)
        afterFlush = .lingerThenClose
        respond(server.responder.errorResponse(status: error.status, detail: error.detail))
    }

    // MARK: Writing

    /// Sends the response to the request in flight.
    func respond(_ response: HTTPResponse) {
        guard case .responding(let isHead, let requestKeepAlive, let version) = phase else { return }
        let keepAlive = requestKeepAlive && !draining && afterFlush == .stayOpen
        writeHead(response, version: version, keepAlive: keepAlive, contentLength: response.body.count)
        if !isHead && !response.status.forbidsBody {
            output.append(contentsOf: response.body)
        }
        if !keepAlive && afterFlush == .stayOpen { afterFlush = .close }
        phase = .reading
        flush()
        if case .reading = phase, !hasPendingOutput { processInput() }
    }

    func startStream(_ head: HTTPResponse, progress: StreamProgress, onClose: @escaping @Sendable () -> Void) {
        guard case .responding(_, _, let version) = phase else { return onClose() }
        let chunked = version == .http1_1
        var head = head
        if chunked { head.headers.set("Transfer-Encoding", "chunked") }
        writeHead(head, version: version, keepAlive: chunked && !draining, contentLength: nil)
        phase = .streaming(chunked: chunked)
        // A small kernel buffer per stream bounds the kernel memory of many idle subscribers, and
        // makes a slow reader visible soon, so the producer coalesces instead of queueing.
        var bufferSize = Int32(server.configuration.streamSendBuffer)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        onStreamClose = onClose
        streamProgress = progress
        flush()
        if draining { finishStream() }
    }

    func writeStream(_ bytes: [UInt8]) {
        streamWrites += 1
        guard case .streaming(let chunked) = phase, afterFlush == .stayOpen, !bytes.isEmpty else { return }
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
        var size = Int32(clamping: bytes)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    func whenStreamDrained(_ callback: @escaping @Sendable () -> Void) {
        guard case .streaming = phase else { return }
        if hasPendingOutput { drainCallbacks.append(callback) } else { callback() }
    }

    func finishStream() {
        guard case .streaming(let chunked) = phase, afterFlush == .stayOpen else { return }
        if chunked { output.append(contentsOf: "0\r\n\r\n".utf8) }
        afterFlush = .close
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
                // An inactivity timeout: it runs from the last time the client took any bytes.
                if case .write = deadline, !progressed {
                } else {
                    deadline = .write(monotonicMilliseconds() + server.configuration.writeTimeout)
                }
                return
            } else {
                close()
                return
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 64 * 1024)
        outputIndex = 0
        if case .write = deadline { deadline = .none }
        if let streamProgress {
            streamProgress.sent.store(streamWrites, ordering: .relaxed)
            if !drainCallbacks.isEmpty {
                let callbacks = drainCallbacks
                drainCallbacks = []
                callbacks.forEach { $0() }
            }
        }
        switch afterFlush {
        case .stayOpen:
            break
        case .lingerThenClose where inbound != .ended:
            afterFlush = .close
            phase = .lingering
            input = []
            inputIndex = 0
            deadline = .linger(monotonicMilliseconds() + 2_000)
            shutdown(fd, Int32(SHUT_WR))
            readAvailable()
        case .close, .lingerThenClose:
            close()
        }
    }

    private func close() {
        if case .closed = phase { return }
        phase = .closed
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
