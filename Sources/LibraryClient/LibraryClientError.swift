import Foundation
import JSON
import LibraryModel

/// Everything a client call can fail with, decoded from the server's `application/problem+json`
/// (RFC 9457) or from the transport.
public enum LibraryClientError: Error, Sendable, Equatable {
    /// 404: the resource does not exist (its model, if held, is marked deleted).
    case notFound(detail: String)
    /// 412: the resource changed since the model's version and a field the write changes is not
    /// what it was; the model now shows `current`, the server's state.
    case conflict(current: ResourceState, detail: String)
    /// 422: the body's fields, each with what is wrong with it.
    case validation([FieldProblem])
    /// 401: the call needs a token (`apiToken` for writes, `readToken` for reads when the server has
    /// one), or the token did not verify (after the token provider was asked again, if there is one).
    case unauthorized(detail: String)
    /// 403: the token's rights do not allow this change (it may read the library, not write it),
    /// or the stream's side channel was called by another principal.
    case forbidden(detail: String)
    /// 503: the server or its database cannot answer now; try again after `retryAfter`.
    case unavailable(retryAfter: Duration?, detail: String)
    /// Any other refusal (400, 413, 415, …), with its status and detail.
    case rejected(status: Int, detail: String)
    /// No answer: the connection failed or timed out (writes without a key may or may not have happened).
    case transport(String)

    /// One field of a 422, as the server names it.
    public struct FieldProblem: Sendable, Equatable {
        /// The field's name in JSON (`""` for the body as a whole).
        public let field: String
        /// What is wrong with its value, in the server's words.
        public let message: String
    }

    init(status: Int, headers: [(String, String)], body: [UInt8]) {
        let problem = try? JSONValue.decode(body)
        let detail =
            problem?[ProblemMember.detail.rawValue]?.string ?? problem?[ProblemMember.summary.rawValue]?.string
            ?? "HTTP \(status)"
        switch status {
        case 404: self = .notFound(detail: detail)
        case 401: self = .unauthorized(detail: detail)
        case 403: self = .forbidden(detail: detail)
        case 422:
            let problems = (problem?[ProblemMember.errors.rawValue]?.array ?? []).map {
                FieldProblem(
                    field: $0[ProblemMember.field.rawValue]?.string ?? "",
                    message: $0[ProblemMember.message.rawValue]?.string ?? "")
            }
            self = .validation(problems.isEmpty ? [FieldProblem(field: "", message: detail)] : problems)
        case 503:
            let seconds = headers.first { $0.0.lowercased() == "retry-after" }.flatMap { Int($0.1) }
            self = .unavailable(retryAfter: seconds.map { .seconds($0) }, detail: detail)
        default: self = .rejected(status: status, detail: detail)
        }
    }
}

/// A resource's fields as the server sent them, by JSON name: the state a conflict carries.
public struct ResourceState: Sendable, Equatable {
    /// Every field the server sent, by its JSON name.
    public let values: [String: FieldValue]

    /// A book's field, if the state has it.
    public subscript(field: BookField) -> FieldValue? { values[field.name] }
    /// A library's field, if the state has it.
    public subscript(field: LibraryField) -> FieldValue? { values[field.name] }
    /// The resource's version in this state.
    public var version: Int? { values["version"]?.int }
}
