import Foundation
import Hummingbird
import PostgresNIO

/// A book as library-server represents it: members in its order, `isbn` and `publishedYear`
/// written as null when empty.
///
/// Written out with `JSONObject` rather than Hummingbird's default `JSONEncoder`: Foundation's
/// encoder on Linux writes an object's members in hash order (a different one every run), and
/// escapes `/`, so its bodies would not be library-server's byte for byte.
struct Book: ResponseGenerator {
    var id: String
    var libraryId: String
    var title: String
    var author: String
    var isbn: String?
    var publishedYear: Int?
    var available: Bool
    var version: Int
    var createdAt: String
    var updatedAt: String

    /// The columns `init(row:)` reads, in its order.
    static let columns =
        "id, library_id, title, author, isbn, published_year, available, version, created_at, updated_at"

    init(row: PostgresRow) throws {
        (id, libraryId, title, author, isbn, publishedYear, available, version, createdAt, updatedAt) = try row.decode(
            (String, String, String, String, String?, Int?, Bool, Int, String, String).self)
    }

    var json: JSONObject {
        var object = JSONObject()
        object.add("id", id)
        object.add("libraryId", libraryId)
        object.add("title", title)
        object.add("author", author)
        object.add("isbn", isbn)
        object.add("publishedYear", publishedYear)
        object.add("available", available)
        object.add("version", version)
        object.add("createdAt", createdAt)
        object.add("updatedAt", updatedAt)
        return object
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        json.response(.ok, contentType: "application/json")
    }
}

/// A JSON object written member by member, in order, escaped as library-server escapes strings.
struct JSONObject {
    private var text = "{"

    private mutating func key(_ key: String) {
        if text.utf8.count > 1 { text += "," }
        Self.append(key, to: &text)
        text += ":"
    }

    mutating func add(_ key: String, _ value: String?) {
        self.key(key)
        if let value { Self.append(value, to: &text) } else { text += "null" }
    }

    mutating func add(_ key: String, _ value: Int?) {
        self.key(key)
        text += value.map(String.init) ?? "null"
    }

    mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        text += value ? "true" : "false"
    }

    mutating func add(_ key: String, _ values: [JSONObject]) {
        self.key(key)
        text += "[" + values.map(\.string).joined(separator: ",") + "]"
    }

    var string: String { text + "}" }

    func response(_ status: HTTPResponse.Status, contentType: String) -> Response {
        Response(
            status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: string)))
    }

    /// `value` as a JSON string: quotes, backslashes and control characters escaped, nothing else.
    static func append(_ value: String, to text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}

/// The body of `PATCH /books/{id}`, a JSON merge patch. This comparator changes `title` only; any
/// other member is refused (422) rather than silently ignored.
struct BookPatch: Decodable {
    var title: String?

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        for key in container.allKeys where key.stringValue != "title" {
            throw Problem.invalid(field: key.stringValue, "is not supported by this comparator (title only)")
        }
        let key = AnyKey(stringValue: "title")
        guard container.contains(key) else { return }
        guard let title = try? container.decode(String.self, forKey: key) else {
            throw Problem.invalid(field: "title", "must be a string")
        }
        guard (1...500).contains(title.unicodeScalars.count) else {
            throw Problem.invalid(field: "title", "must be 1 to 500 characters long")
        }
        self.title = title
    }
}

/// An `application/problem+json` answer with library-server's members and wording.
struct Problem: HTTPResponseError {
    var status: HTTPResponse.Status
    var type: String
    var detail: String
    var errors: [FieldError] = []

    struct FieldError {
        var field: String
        var message: String
    }

    init(_ status: HTTPResponse.Status, _ type: String, _ detail: String, errors: [FieldError] = []) {
        self.status = status
        self.type = "urn:library-server:problem:" + type
        self.detail = detail
        self.errors = errors
    }

    static func notFound(_ resource: String) -> Problem { Problem(.notFound, "not-found", "No \(resource) exists.") }

    static func badRequest(_ detail: String) -> Problem { Problem(.badRequest, "bad-request", detail) }

    static func preconditionFailed(_ resource: String) -> Problem {
        Problem(
            .preconditionFailed, "precondition-failed",
            "The \(resource) has changed: If-Match does not match its ETag.")
    }

    static func invalid(field: String, _ message: String) -> Problem {
        Problem(
            .unprocessableContent, "validation", "The request body is not acceptable: \(field) \(message).",
            errors: [FieldError(field: field, message: message)])
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var object = JSONObject()
        object.add("type", type)
        object.add("title", status.reasonPhrase)
        object.add("status", status.code)
        object.add("detail", detail)
        if !errors.isEmpty {
            object.add(
                "errors",
                errors.map { error in
                    var item = JSONObject()
                    item.add("field", error.field)
                    item.add("message", error.message)
                    return item
                })
        }
        return object.response(status, contentType: "application/problem+json")
    }
}

/// RFC 3339 UTC with milliseconds, as library-server stores timestamps.
func timestamp() -> String {
    Date.now.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
}
