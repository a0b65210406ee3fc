import APICore
import HTTPServer
import LibraryDomain

extension LibraryAPI {
    /// 200 when a reader answers a query and the writer could take the write lock; 503 otherwise,
    /// so a health check notices a database that is locked or has become unwritable. Concurrent
    /// checks share one probe (`HealthProbe`).
    func health(_ exchange: Exchange) {
        healthProbe.check { result in
            switch result {
            case .success:
                var response = HTTPResponse.json(.ok, Array(#"{"status":"ok"}"#.utf8))
                response.headers.set("Cache-Control", "no-store")
                exchange.finish(response)
            case .failure(let error): self.unhealthy(exchange, error)
            }
        }
    }

    private func unhealthy(_ exchange: Exchange, _ error: StoreError) {
        logger.warning("health check failed", metadata: ["error": "\(error.detail)"])
        exchange.fail(APIError.unavailable())
    }

    func metricsResponse() -> HTTPResponse {
        HTTPResponse(
            status: .ok,
            headers: HTTPHeaders([
                ("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store"),
            ]),
            body: Array(metrics.render().utf8)
        )
    }

    /// The project's openapi.yaml, embedded at build time.
    func specResponse() -> HTTPResponse {
        HTTPResponse(
            status: .ok,
            headers: HTTPHeaders([("Content-Type", "application/yaml")]),
            body: Array((EmbeddedSpec.files.first?.contents ?? "").utf8)
        )
    }
}

extension LibraryAPI {
    /// A console file with the page's security headers; a 304 when `If-None-Match` names its tag.
    ///
    /// `no-cache` (revalidate every time, a 304 costs a few bytes) rather than a lifetime, so a new
    /// binary's console is never mixed with an old one's cached modules.
    func consoleResponse(_ name: String, _ request: HTTPRequest) throws(APIError) -> HTTPResponse {
        guard let file = console.file(named: name) else {
            throw .notFound("The console has no file named \(name.prefix(64)).")
        }
        var headers = HTTPHeaders([
            ("Cache-Control", "no-cache"), ("ETag", file.entityTag),
            ("Content-Security-Policy", ConsoleFiles.contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ])
        if try EntityTag.noneMatchHits(
            request.headers["if-none-match"], opaque: String(file.entityTag.dropFirst().dropLast()))
        {
            return HTTPResponse(status: .notModified, headers: headers)
        }
        headers.set("Content-Type", file.contentType)
        return HTTPResponse(status: .ok, headers: headers, body: file.body)
    }
}
