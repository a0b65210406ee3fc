import APICore
import EventStreams
import HTTPServer
import JSON
import LibraryDomain
import LiveEngine
import Logging

/// The REST API of libraries and books: the `HTTPResponder` the server calls for every request.
///
/// Every request is routed and checked (route, method, token, query, body) on its event-loop
/// thread. On SQLite its reads run there too, on the loop's own reader; writes, and every read on
/// PostgreSQL, run on a database thread, and the response is built and sent back on the loop.
package final class LibraryAPI: HTTPResponder {
    let store: any LibraryDatabase
    let configuration: APIConfiguration
    let cors: CORS
    let logger: Logger
    let hub: LiveHub
    /// The event-stream endpoints, which requests for streams are handed to once admitted.
    let streams: EventStreams
    /// Whether the logger's level lets `info` through: then every request gets an access-log line,
    /// built as bytes and batched per event loop (`HTTPResponseWriter.log`), not through swift-log.
    let logsRequests: Bool
    /// Request counts and latencies; gauges from other layers can be added.
    package let metrics = Metrics()
    /// The database check behind `/healthz`, shared by concurrent health checks.
    let healthProbe: HealthProbe
    /// The browser console's files, served at `/` and `/console/…`.
    let console: ConsoleFiles

    package init(store: any LibraryDatabase, hub: LiveHub, configuration: APIConfiguration, logger: Logger) {
        self.store = store
        self.hub = hub
        self.configuration = configuration
        self.cors = CORS(configuration.corsOrigin)
        self.logger = logger
        self.healthProbe = HealthProbe(store: store)
        self.console = ConsoleFiles(directory: configuration.consoleDirectory)
        self.logsRequests = logger.logLevel <= .info
        if let signed = configuration.signedTokens {
            self.streams = EventStreams(hub: hub, clock: signed.clock)
        } else {
            self.streams = EventStreams(hub: hub)
        }
        reportMetrics()
    }

    /// Wires the live hub's counters and the store's write timings into `metrics`.
    private func reportMetrics() {
        let counters = hub.counters
        metrics.addGauge("library_sse_subscribers", help: "Event-stream subscribers open now.") {
            counters.subscribers.load(ordering: .relaxed)
        }
        metrics.addGauge(
            "library_live_windows", help: "Windows of lists open now (different queries, cursors and rights)."
        ) {
            counters.windows.load(ordering: .relaxed)
        }
        metrics.addCounter(
            "library_live_window_reads_total",
            help: "Reads of a window's rows: one as it opens, one per change that took a member out of a full window."
        ) {
            counters.windowReads.load(ordering: .relaxed)
        }
        metrics.addCounter(
            "library_access_log_lines_dropped_total",
            help: "Access-log lines dropped because the reader of stderr had no room for them."
        ) {
            LogSink.standardError.dropped.load(ordering: .relaxed)
        }
        metrics.addCounter("library_sse_events_sent_total", help: "Events written to event streams since start.") {
            counters.events.load(ordering: .relaxed)
        }
        metrics.addGauge(
            "library_live_lag_changes",
            help: "Committed changes not yet published to subscribers (latest committed id minus latest published id)."
        ) {
            counters.lag
        }
        metrics.addCounter(
            "library_live_changes_folded_total",
            help: "Committed changes folded into later ones because the live side was behind the writer."
        ) {
            counters.folded.load(ordering: .relaxed)
        }
        metrics.addCounter(
            "library_sse_changes_coalesced_total",
            help: "Changes folded into a pending event for a slow reader (counted when its stream ends)."
        ) {
            counters.coalesced.load(ordering: .relaxed)
        }
        if store.engineHeapBytes != nil {
            metrics.addGauge(
                "library_sqlite_memory_bytes",
                help: "Heap bytes SQLite holds (every connection's page cache included), part of the process's RSS."
            ) { [store] in
                store.engineHeapBytes ?? 0
            }
        }
        let healthProbe = self.healthProbe
        metrics.addCounter("library_health_probes_total", help: "Database probes run for /healthz since start.") {
            healthProbe.probesStarted
        }
        metrics.addGauge("library_health_checks_waiting", help: "Health checks waiting for the probe under way.") {
            healthProbe.waiting
        }
        if let signed = configuration.signedTokens {
            metrics.addCounter(
                "library_token_refusals_total",
                help:
                    "Signed tokens refused (401), by the rule they broke; a refused right is a 403 in library_http_requests_total.",
                label: "reason"
            ) {
                signed.refusalCounts
            }
            metrics.addGauge(
                "library_tokens_cached", help: "Distinct signed tokens verified and kept until they expire."
            ) {
                signed.cachedTokens
            }
            metrics.addCounter(
                "library_sse_streams_expired_total",
                help: "Event streams ended because the signed token that opened (or last extended) them expired."
            ) {
                counters.expiredStreams.load(ordering: .relaxed)
            }
        }
        store.observeTransactions { [metrics] duration, writes in
            let (seconds, attoseconds) = duration.components
            metrics.recordTransaction(seconds: Double(seconds) + Double(attoseconds) * 1e-18, writes: writes)
        }
    }

    /// Adds the server's open-connection counts, in all and per event loop, to `metrics`.
    package func reportMetrics(of server: HTTPServer) {
        metrics.addGauge("library_http_open_connections", help: "Client connections open now.") {
            server.openConnections
        }
        metrics.addGauge(
            "library_http_loop_connections", help: "Client connections open now, per event loop.", label: "loop"
        ) {
            server.openConnectionsPerLoop
        }
    }

    package func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        // `/healthz` says nothing a rebinding page could use, and probes (a container's
        // HEALTHCHECK, a load balancer) may name the server by any address. An absolute-form
        // target's authority stands for Host (RFC 9112 §3.2.2).
        let host = request.authority ?? request.headers["host"]
        guard configuration.allowedHosts.permits(host) || request.path == "/healthz" else {
            let error = APIError(
                HTTPStatus(421, "Misdirected Request"),
                "misdirected-request",
                "This server does not answer for the host the request names (its Host, or an absolute-form target's authority; see --allowed-hosts)."
            )
            Exchange(request: request, writer: writer, api: self, route: "unmatched").fail(error)
            return
        }
        let route: Route
        do {
            route = try Route(path: request.path)
        } catch {
            Exchange(request: request, writer: writer, api: self, route: "unmatched").fail(error)
            return
        }
        let principal: Principal
        do {
            principal = try admit(route, request)
        } catch {
            Exchange(request: request, writer: writer, api: self, route: route.template).fail(error)
            return
        }
        let exchange = Exchange(
            request: request, writer: writer, api: self, route: route.template, principal: principal)
        do {
            try handle(route, exchange)
        } catch {
            exchange.fail(error)
        }
    }

    /// Answers from the head alone when route, method, token or media type already refuse the
    /// request, so a client waiting for `100 Continue` does not upload a body that would be refused.
    package func respondBeforeBody(to head: HTTPRequest, writer: HTTPResponseWriter) -> Bool {
        let route: Route
        do {
            route = try Route(path: head.path)
        } catch {
            Exchange(request: head, writer: writer, api: self, route: "unmatched").fail(error)
            return true
        }
        do {
            _ = try admit(route, head)
            return false
        } catch {
            Exchange(request: head, writer: writer, api: self, route: route.template).fail(error)
            return true
        }
    }

    package func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse {
        let type = status.reason.lowercased().split(separator: " ").joined(separator: "-")
        return APIError(status, type, detail).response
    }

    /// The checks the head alone decides: the method (405), the credential (401: who the request
    /// comes from) and the body's media type (415). Run for every request, and before the body of
    /// one sent with `Expect: 100-continue`. Rights are the handlers': what a principal may read
    /// or change depends on the library, which only the data says.
    private func admit(_ route: Route, _ request: HTTPRequest) throws(APIError) -> Principal {
        let method = request.method
        guard route.allows(method) else {
            var error = APIError(
                .methodNotAllowed, "method-not-allowed", "\(route.template) does not support \(method.prefix(32)).")
            error.headers.set("Allow", route.allow)
            throw error
        }
        let need: Need
        switch (route, method) {
        case (_, "OPTIONS"): need = .nothing  // CORS preflights carry no credentials
        case (.events, "POST"): need = .stream  // a stream: reading, not writing
        case (.eventStream, "POST"): need = .read  // its watches: reading, but no token in the URL
        case (_, "POST"), (_, "PUT"), (_, "PATCH"), (_, "DELETE"): need = .write
        case (.health, _), (.openAPI, _), (.console, _):
            need = .nothing  // open to probes, tools and browsers: no data in them
        case (.metrics, _):
            // Counts, no data: open unless a read token keeps everything else closed.
            need = configuration.readToken == nil ? .nothing : .read
        case (.libraryEvents, _), (.bookEvents, _), (.librariesEvents, _), (.booksEvents, _), (.events, _):
            need = .stream
        default: need = .read
        }
        let principal = try principal(request, for: need)
        switch method {
        case "POST", "PUT", "PATCH": try RequestBody.checkMediaType(of: request)
        default: break
        }
        return principal
    }

    private func handle(_ route: Route, _ exchange: Exchange) throws(APIError) {
        let method = exchange.request.method
        if method == "OPTIONS" {
            return exchange.finish(cors.options(allow: route.allow, for: exchange.request))
        }
        switch (route, method) {
        case (.libraries, "POST"): try createLibrary(exchange)
        case (.libraries, _): try listLibraries(exchange)
        case (.library(let id), "PUT"): try replaceLibrary(id, exchange)
        case (.library(let id), "PATCH"): try patchLibrary(id, exchange)
        case (.library(let id), "DELETE"): try deleteLibrary(id, exchange)
        case (.library(let id), _): try getLibrary(id, exchange)
        case (.libraryBooks(let id), "POST"): try createBook(in: id, exchange)
        case (.libraryBooks(let id), _): try listBooks(in: id, exchange)
        case (.books, "POST"): try createBook(in: nil, exchange)
        case (.books, _): try listBooks(in: nil, exchange)
        case (.book(let id), "PUT"): try replaceBook(id, exchange)
        case (.book(let id), "PATCH"): try patchBook(id, exchange)
        case (.book(let id), "DELETE"): try deleteBook(id, exchange)
        case (.book(let id), _): try getBook(id, exchange)
        case (.libraryEvents(let id), _): try streams.streamEvents(.library(id), exchange)
        case (.bookEvents(let id), _): try streams.streamEvents(.book(id), exchange)
        case (.librariesEvents, _): try streams.streamEvents(.libraries, exchange)
        case (.booksEvents, _): try streams.streamEvents(.books(BookFilter()), exchange)
        case (.events, "POST"): try streams.streamPostedWatches(exchange)
        case (.eventStream(let id), _): try streams.changeWatches(of: id, exchange)
        case (.events, _): try streams.streamWatches(exchange)
        case (.health, _): health(exchange)
        case (.metrics, _): exchange.finish(metricsResponse())
        case (.openAPI, _): exchange.finish(specResponse())
        case (.console(let name), _): exchange.finish(try consoleResponse(name, exchange.request))
        }
    }
}
