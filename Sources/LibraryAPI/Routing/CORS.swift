import APICore
import HTTPServer

/// Cross-origin access for browser clients, off unless an origin is configured.
struct CORS: Sendable {
    /// `*`, or the exact origins allowed; empty when CORS is off.
    private let origins: [String]

    static let allowedHeaders =
        "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, Last-Event-ID, X-Request-ID"
    static let exposedHeaders = "ETag, Location, Retry-After, Stream-Id, X-Request-ID"

    init(_ configured: String?) {
        origins = (configured ?? "").split(separator: ",").map { String($0.trimmedOWS()) }.filter { !$0.isEmpty }
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, or nil when not allowed.
    private func allowed(_ origin: String?) -> String? {
        guard let origin else { return nil }
        if origins.contains("*") { return "*" }
        return origins.contains(origin) ? origin : nil
    }

    /// Adds the CORS headers to a response for an allowed origin.
    func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard !origins.isEmpty else { return }
        response.headers.add("Vary", "Origin")
        guard let allow = allowed(request.headers["origin"]) else { return }
        response.headers.set("Access-Control-Allow-Origin", allow)
        response.headers.set("Access-Control-Expose-Headers", Self.exposedHeaders)
    }

    /// The answer to `OPTIONS` on a route: its methods (`allow`, as an `Allow` value), plus
    /// preflight headers when CORS applies.
    func options(allow: String, for request: HTTPRequest) -> HTTPResponse {
        var response = HTTPResponse(status: .noContent, headers: HTTPHeaders([("Allow", allow)]))
        if allowed(request.headers["origin"]) != nil, request.headers["access-control-request-method"] != nil {
            response.headers.set("Access-Control-Allow-Methods", allow)
            response.headers.set("Access-Control-Allow-Headers", Self.allowedHeaders)
            response.headers.set("Access-Control-Max-Age", "600")
        }
        return response
    }
}
