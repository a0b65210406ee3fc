/// A response status code and its reason phrase.
package struct HTTPStatus: Sendable, Equatable, Hashable {
    package let code: Int
    package let reason: String

    package init(_ code: Int, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    package static let `continue` = HTTPStatus(100, "Continue")
    package static let ok = HTTPStatus(200, "OK")
    package static let created = HTTPStatus(201, "Created")
    package static let noContent = HTTPStatus(204, "No Content")
    package static let notModified = HTTPStatus(304, "Not Modified")
    package static let badRequest = HTTPStatus(400, "Bad Request")
    package static let unauthorized = HTTPStatus(401, "Unauthorized")
    package static let forbidden = HTTPStatus(403, "Forbidden")
    package static let notFound = HTTPStatus(404, "Not Found")
    package static let methodNotAllowed = HTTPStatus(405, "Method Not Allowed")
    package static let requestTimeout = HTTPStatus(408, "Request Timeout")
    package static let preconditionFailed = HTTPStatus(412, "Precondition Failed")
    package static let contentTooLarge = HTTPStatus(413, "Content Too Large")
    package static let uriTooLong = HTTPStatus(414, "URI Too Long")
    package static let unsupportedMediaType = HTTPStatus(415, "Unsupported Media Type")
    package static let expectationFailed = HTTPStatus(417, "Expectation Failed")
    package static let unprocessableContent = HTTPStatus(422, "Unprocessable Content")
    package static let requestHeaderFieldsTooLarge = HTTPStatus(431, "Request Header Fields Too Large")
    package static let internalServerError = HTTPStatus(500, "Internal Server Error")
    package static let notImplemented = HTTPStatus(501, "Not Implemented")
    package static let serviceUnavailable = HTTPStatus(503, "Service Unavailable")
    package static let httpVersionNotSupported = HTTPStatus(505, "HTTP Version Not Supported")

    /// Whether a response with this status never has a body (1xx, 204, 304).
    package var forbidsBody: Bool { code < 200 || code == 204 || code == 304 }
}
