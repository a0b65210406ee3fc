import HTTPServer
import LibraryDomain

extension LibraryAPI {
    /// 200 once the database answers a query; 503 otherwise.
    func health(_ exchange: Exchange) {
        store.read({ reader in try reader.ping() }) { result in
            switch result {
            case .success:
                exchange.finish(.json(.ok, Array(#"{"status":"ok"}"#.utf8)))
            case .failure(let error):
                self.logger.warning("health check failed", metadata: ["error": "\(error.detail)"])
                exchange.fail(APIError.unavailable())
            }
        }
    }

    func metricsResponse() -> HTTPResponse {
        HTTPResponse(
            status: .ok,
            headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]),
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
