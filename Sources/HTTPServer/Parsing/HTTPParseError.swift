/// Why a request could not be parsed; the connection answers with `status` and closes.
package struct HTTPParseError: Error, Equatable, Sendable {
    /// The status to answer with: 400, 413, 414, 417, 431, 501 or 505.
    package let status: HTTPStatus
    /// A sentence for the client saying what was wrong.
    package let detail: String

    package init(_ status: HTTPStatus, _ detail: String) {
        self.status = status
        self.detail = detail
    }

    static func bad(_ detail: String) -> HTTPParseError { HTTPParseError(.badRequest, detail) }
}
