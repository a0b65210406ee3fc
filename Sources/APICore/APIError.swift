import HTTPServer
import JSON
import LibraryDomain
import LibraryModel

/// An error answered as `application/problem+json` (RFC 9457).
///
/// Every failure of the API layer becomes one of these at the edge; store errors map through
/// `init(_: StoreError)`, which keeps SQL and internals out of the response.
package struct APIError: Error, Sendable {
    package let status: HTTPStatus
    /// A URI naming the kind of problem; documented in openapi.yaml.
    package let type: String
    package let detail: String
    package var errors: [FieldError] = []
    /// How many field errors were found beyond those in `errors` (see `maxListedErrors`).
    package var errorsOmitted = 0
    package var headers = HTTPHeaders()

    /// A 422 lists at most this many field errors, so the answer to a body of many bad members
    /// stays small whatever the body's size (one per member would amplify the request).
    package static let maxListedErrors = 20

    package init(_ status: HTTPStatus, _ type: String, _ detail: String, errors: [FieldError] = []) {
        self.status = status
        self.type = "urn:library-server:problem:" + type
        self.detail = detail
        self.errors = errors
    }

    package static func badRequest(_ detail: String) -> APIError { APIError(.badRequest, "bad-request", detail) }

    package static func notFound(_ detail: String) -> APIError { APIError(.notFound, "not-found", detail) }

    /// A 422 that lists the first `maxListedErrors` of `errors` and counts the rest.
    package static func invalid(_ errors: [FieldError]) -> APIError {
        let listed = Array(errors.prefix(maxListedErrors))
        let omitted = errors.count - listed.count
        var summary = listed.map { "\($0.field) \($0.message)" }.joined(separator: "; ")
        if omitted > 0 { summary += "; and \(omitted) more" }
        var error = APIError(
            .unprocessableContent, "validation", "The request body is not acceptable: \(summary).", errors: listed)
        error.errorsOmitted = omitted
        return error
    }

    package static func unavailable() -> APIError {
        var error = APIError(
            .serviceUnavailable, "unavailable", "The database is unavailable right now; retry shortly.")
        error.headers.set("Retry-After", "1")
        return error
    }

    package static let internalError = APIError(
        .internalServerError,
        "internal",
        "The server failed to answer this request; the failure is logged."
    )

    /// The API's view of a store failure; `resource` names what was looked up ("library 3f2a…").
    package init(_ error: StoreError, resource: String) {
        switch error.kind {
        case .notFound: self = .notFound("No \(resource) exists.")
        case .forbidden(let detail): self = APIError(.forbidden, "forbidden", detail)
        case .preconditionFailed:
            self = APIError(
                .preconditionFailed, "precondition-failed",
                "The \(resource) has changed: If-Match does not match its ETag.")
        case .invalid(let errors): self = .invalid(errors)
        case .unavailable: self = .unavailable()
        case .atCapacity(let detail):
            self = APIError(.serviceUnavailable, "unavailable", detail)
            headers.set("Retry-After", "1")
        case .internal: self = .internalError
        }
    }

    /// The problem document as a response.
    package var response: HTTPResponse {
        var json = JSONWriter()
        json.beginObject()
        json.key(ProblemMember.type.rawValue)
        json.string(type)
        json.key(ProblemMember.summary.rawValue)
        json.string(status.reason)
        json.key(ProblemMember.status.rawValue)
        json.int(status.code)
        json.key(ProblemMember.detail.rawValue)
        json.string(detail)
        if !errors.isEmpty {
            json.key(ProblemMember.errors.rawValue)
            json.beginArray()
            for error in errors {
                json.beginObject()
                json.key(ProblemMember.field.rawValue)
                json.string(error.field)
                json.key(ProblemMember.message.rawValue)
                json.string(error.message)
                json.endObject()
            }
            json.endArray()
        }
        if errorsOmitted > 0 {
            json.key(ProblemMember.errorsOmitted.rawValue)
            json.int(errorsOmitted)
        }
        json.endObject()
        var headers = headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: status, headers: headers, body: json.bytes)
    }
}
