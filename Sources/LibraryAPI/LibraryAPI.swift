import HTTPServer
import LibraryDomain
import Logging

/// The REST API of libraries and books: the `HTTPResponder` the server calls for every request.
///
/// Checks that need no database (route, method, token, query, body) run on the event-loop thread;
/// the rest runs on a database thread, which sends the response.
package final class LibraryAPI: HTTPResponder {
    let store: LibraryStore
    let configuration: APIConfiguration
    let cors: CORS
    let logger: Logger
    let hub: LiveHub
    /// Request counts and latencies; gauges from other layers can be added.
    package let metrics = Metrics()

    package init(store: LibraryStore, hub: LiveHub, configuration: APIConfiguration, logger: Logger) {
        self.store = store
        self.hub = hub
        self.configuration = configuration
        self.cors = CORS(configuration.corsOrigin)
        self.logger = logger
        reportMetrics()
    }

    /// Wires the live hub's counters and the store's write timings into `metrics`.
    private func reportMetrics() {
        let counters = hub.counters
        metrics.addGauge("library_sse_subscribers", help: "Event-stream subscribers open now.") {
            counters.subscribers.load(ordering: .relaxed)
        }
        metrics.addCounter("library_sse_events_sent_total", help: "Events written to event streams since start.") {
            counters.events.load(ordering: .relaxed)
        }
        metrics.addCounter(
            "library_sse_changes_coalesced_total",
            help: "Changes folded into a pending event for a slow reader (counted when its stream ends)."
        ) {
            counters.coalesced.load(ordering: .relaxed)
        }
        store.observeTransactions { [metrics] duration, writes in
            let (seconds, attoseconds) = duration.components
            metrics.recordTransaction(seconds: Double(seconds) + Double(attoseconds) * 1e-18, writes: writes)
        }
    }

    /// Adds the server's open-connection count to `metrics`.
    package func reportMetrics(of server: HTTPServer) {
        metrics.addGauge("library_http_open_connections", help: "Client connections open now.") {
            server.openConnections
        }
    }

    package func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        let route: Route
        do {
            route = try Route(path: request.path)
        } catch {
            Exchange(request: request, writer: writer, api: self, route: "unmatched").fail(error)
            return
        }
        let exchange = Exchange(request: request, writer: writer, api: self, route: route.template)
        do {
            try handle(route, exchange)
        } catch {
            exchange.fail(error)
        }
    }

    package func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse {
        let type = status.reason.lowercased().split(separator: " ").joined(separator: "-")
        return APIError(status, type, detail).response
    }

    private func handle(_ route: Route, _ exchange: Exchange) throws(APIError) {
        let method = exchange.request.method
        guard route.methods.contains(method) else {
            var error = APIError(
                .methodNotAllowed, "method-not-allowed", "\(route.template) does not support \(method).")
            error.headers.set("Allow", route.methods.joined(separator: ", "))
            throw error
        }
        if method == "OPTIONS" {
            return exchange.finish(cors.options(methods: route.methods, for: exchange.request))
        }
        if ["POST", "PUT", "PATCH", "DELETE"].contains(method) {
            try authorize(exchange.request)
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
        case (.libraryEvents(let id), _): try streamEvents(.library(id), exchange)
        case (.bookEvents(let id), _): try streamEvents(.book(id), exchange)
        case (.health, _): health(exchange)
        case (.metrics, _): exchange.finish(metricsResponse())
        case (.openAPI, _): exchange.finish(specResponse())
        }
    }
}
