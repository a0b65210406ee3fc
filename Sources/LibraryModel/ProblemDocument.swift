/// The members of the API's error bodies (`application/problem+json`, RFC 9457, with the 422's
/// `errors`): written by the server, read by the client, named here once.
public enum ProblemMember: String, Sendable {
    /// A URI naming the kind of problem.
    case type
    /// RFC 9457's short, human-readable summary (its member `title`): the status's reason phrase.
    case summary = "title"
    case status
    /// What went wrong with this request, for a person.
    case detail
    /// A 422's invalid fields, each an object of `field` and `message`.
    case errors
    /// How many invalid fields were left out of `errors`.
    case errorsOmitted
    case field
    case message
}
