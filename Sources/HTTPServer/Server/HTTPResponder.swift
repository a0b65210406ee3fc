/// What the server calls for each complete request: the application side of the HTTP layer.
package protocol HTTPResponder: Sendable {
    /// Answers `request` through `writer`, exactly once, from any thread and at any later time.
    ///
    /// Called on an event-loop thread: blocking work must move elsewhere before answering.
    func respond(to request: HTTPRequest, writer: HTTPResponseWriter)

    /// The response for a request the server rejects itself (malformed, too large, timed out), so
    /// every error a client sees has the application's format.
    func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse
}

extension HTTPResponder {
    package func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse {
        .text(status, detail + "\n")
    }
}
