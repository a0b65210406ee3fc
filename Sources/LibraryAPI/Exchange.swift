import APICore
import EventStreams
import Glibc
import HTTPServer
import LibraryDomain
import Logging

/// One request on its way to a response: everything a handler needs, and the single exit through
/// which every response leaves (request id, CORS, metrics, the log line).
final class Exchange: Sendable {
    let request: HTTPRequest
    let requestID: String
    let route: String
    /// Who the request comes from (no right at all until the request is admitted).
    let principal: Principal
    private let writer: HTTPResponseWriter
    private let api: LibraryAPI
    private let started: UInt64

    init(
        request: HTTPRequest, writer: HTTPResponseWriter, api: LibraryAPI, route: String,
        principal: Principal = .nobody
    ) {
        self.request = request
        self.principal = principal
        self.writer = writer
        self.api = api
        self.route = route
        self.started = Exchange.now()
        if let given = request.headers["x-request-id"], !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 32 && $0 < 127 })
        {
            requestID = given
        } else {
            requestID = Identifier.sequential()
        }
    }

    /// Runs `work` on a reader and answers with its response; store errors become problems
    /// about `resource`.
    ///
    /// On SQLite the read runs here, on the event-loop thread: reads are indexed lookups and
    /// bounded pages that take microseconds, less than handing the work to another thread and the
    /// response back would cost, and each loop has its own reader. On PostgreSQL a read is a
    /// network round trip, so it runs on a database thread and the response comes back here.
    func read(_ resource: String, _ work: @escaping @Sendable (any LibraryReader) throws -> HTTPResponse) {
        api.store.read(lane: LoopThread.index, work) { result in
            self.writer.onLoop { self.complete(result, resource: resource) }
        }
    }

    /// Runs `work` as a write and answers once it has committed, with the response `respond`
    /// makes of its result. `work` runs on the single writer thread (and with it whatever it
    /// builds: an `Idempotency-Key`'s kept answer is made there, in the write's transaction);
    /// `respond`'s response is built and sent on the event-loop thread, which keeps the writer
    /// free for the next writes. `plan`: what the write is, when it is a single-field `PATCH`.
    func write<T: Sendable>(
        _ resource: String,
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite? = nil,
        respond: @escaping @Sendable (T) -> HTTPResponse
    ) {
        let rights = principal.rights
        api.store.write(
            { writer in
                writer.rights = rights
                return try work(writer)
            }, plan: rights.write == .all ? plan : nil
        ) { result in
            self.writer.onLoop { self.complete(result.map(respond), resource: resource) }
        }
    }

    private func complete(_ result: Result<HTTPResponse, StoreError>, resource: String) {
        switch result {
        case .success(let response):
            finish(response)
        case .failure(let error):
            if error.kind == .internal || error.kind == .unavailable {
                api.logger.error(
                    "storage failure",
                    metadata: ["request_id": "\(requestID)", "route": "\(route)", "error": "\(error.detail)"]
                )
            }
            fail(APIError(error, resource: resource))
        }
    }

    /// Answers with the problem for `error`.
    func fail(_ error: any Error) {
        if let error = error as? APIError {
            finish(error.response)
        } else {
            api.logger.error("unexpected error", metadata: ["request_id": "\(requestID)", "error": "\(error)"])
            finish(APIError.internalError.response)
        }
    }

    /// Whether the client has hung up: an event stream for it would be built for nobody.
    var peerHasGone: Bool { writer.peerHasGone }

    /// Closes the connection without an answer, for a client that hung up before its stream
    /// began; recorded as status 499 (nginx's "client closed request"), so `/metrics` shows it.
    func abandon() {
        let seconds = Double(Exchange.now() - started) / 1e9
        api.metrics.record(route: route, method: request.method, status: 499, seconds: seconds)
        writer.abandon()
    }

    /// Starts a streamed response (an event stream), recorded like any other response.
    func openStream(_ head: HTTPResponse, onClose: @escaping @Sendable () -> Void) -> HTTPStream {
        writer.stream(decorate(head), onClose: onClose)
    }

    /// Sends `response` with the headers every response carries, and records it.
    func finish(_ response: HTTPResponse) {
        writer.send(decorate(response))
    }

    private func decorate(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.set("X-Request-ID", requestID)
        // No browser may take a JSON answer (or a problem's) for a script or a page.
        response.headers.set("X-Content-Type-Options", "nosniff")
        // Data that changes at any time: no cache may guess a freshness of its own (REDbot). With
        // an ETag a cache may keep it and revalidate with If-None-Match; without one, keeping it
        // is of no use.
        if response.headers["cache-control"] == nil {
            response.headers.set("Cache-Control", response.headers["etag"] == nil ? "no-store" : "no-cache")
        }
        api.cors.decorate(&response, for: request)
        let seconds = Double(Exchange.now() - started) / 1e9
        api.metrics.record(route: route, method: request.method, status: response.status.code, seconds: seconds)
        if api.logsRequests {
            let (method, route, status, requestID, subject) = (
                Metrics.methodLabel(request.method), route, response.status.code, requestID, principal.subject
            )
            writer.log { line in
                AccessLogLine.append(
                    method: method, route: route, status: status, seconds: seconds, requestID: requestID,
                    subject: subject, to: &line)
            }
        }
        return response
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

extension HTTPResponse {
    /// A JSON response, with `ETag` when a version is given.
    static func json(_ status: HTTPStatus, _ body: [UInt8], version: Int? = nil) -> HTTPResponse {
        var headers = HTTPHeaders([("Content-Type", "application/json")])
        if let version { headers.add("ETag", EntityTag.header(version)) }
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}

/// A stream request is handed to `EventStreams` with its exchange, which keeps logging and
/// decorating its answers.
extension Exchange: StreamExchange {}
