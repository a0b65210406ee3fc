/// What the server calls for each complete request: the application side of the HTTP layer.
package protocol HTTPResponder: Sendable {
    /// Answers `request` through `writer`, exactly once, from any thread and at any later time.
    ///
    /// Called on an event-loop thread: blocking work must move elsewhere before answering.
    func respond(to request: HTTPRequest, writer: HTTPResponseWriter)

    /// The response for a request the server rejects itself (malformed, too large, timed out), so
    /// every error a client sees has the application's format.
    func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse

    /// Judges the head of a request whose client holds its body back for `100 Continue`: answers
    /// through `writer` and returns true when the head alone decides a final response (no route,
    /// wrong method, missing token, not a media type it takes), else returns false and sends nothing.
    ///
    /// An unauthenticated client then never uploads its body. After such an answer the body is not
    /// read and the connection closes. Called on an event-loop thread, before `100 Continue` is sent.
    func respondBeforeBody(to head: HTTPRequest, writer: HTTPResponseWriter) -> Bool
}

extension HTTPResponder {
    package func errorResponse(status: HTTPStatus, detail: String) -> HTTPResponse {
        .text(status, detail + "\n")
    }

    /// Takes every head: the body is read and the request answered by `respond`.
    package func respondBeforeBody(to head: HTTPRequest, writer: HTTPResponseWriter) -> Bool { false }
}
