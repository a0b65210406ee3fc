import HTTPServer
import LibraryDomain

/// Every route of the API, with the ids its path carries.
enum Route: Sendable, Equatable {
    case libraries
    case library(String)
    case libraryBooks(String)
    case libraryEvents(String)
    case books
    case book(String)
    case bookEvents(String)
    case health
    case metrics
    case openAPI

    /// Matches a request path; 404 for no route, 400 for a malformed id or escape.
    init(path: Substring) throws(APIError) {
        guard path != "*" else { throw .notFound("No route matches *.") }
        var segments: [String] = []
        for raw in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst() {
            guard let segment = percentDecode(Substring(raw)) else {
                throw .badRequest("The path has an invalid percent-encoding.")
            }
            segments.append(segment)
        }
        func id(_ text: String, _ kind: String) throws(APIError) -> String {
            guard let id = Identifier.canonical(text) else {
                throw .badRequest("\"\(text)\" is not a valid \(kind) id (a UUID).")
            }
            return id
        }
        guard !segments.contains("") else { throw Self.unknown(path) }
        switch segments.count {
        case 1:
            switch segments[0] {
            case "libraries": self = .libraries
            case "books": self = .books
            case "healthz": self = .health
            case "metrics": self = .metrics
            case "openapi.yaml": self = .openAPI
            default: throw Self.unknown(path)
            }
        case 2 where segments[0] == "libraries": self = .library(try id(segments[1], "library"))
        case 2 where segments[0] == "books": self = .book(try id(segments[1], "book"))
        case 3 where segments[0] == "libraries" && segments[2] == "books":
            self = .libraryBooks(try id(segments[1], "library"))
        case 3 where segments[0] == "libraries" && segments[2] == "events":
            self = .libraryEvents(try id(segments[1], "library"))
        case 3 where segments[0] == "books" && segments[2] == "events": self = .bookEvents(try id(segments[1], "book"))
        default: throw Self.unknown(path)
        }
    }

    private static func unknown(_ path: Substring) -> APIError {
        .notFound("No route matches \(path.prefix(200)).")
    }

    /// The path template, used as the `route` label of metrics and logs.
    var template: String {
        switch self {
        case .libraries: "/libraries"
        case .library: "/libraries/{id}"
        case .libraryBooks: "/libraries/{id}/books"
        case .libraryEvents: "/libraries/{id}/events"
        case .books: "/books"
        case .book: "/books/{id}"
        case .bookEvents: "/books/{id}/events"
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.yaml"
        }
    }

    /// The methods this route answers (OPTIONS is answered everywhere).
    var methods: [String] {
        switch self {
        case .libraries, .books, .libraryBooks: ["GET", "HEAD", "POST", "OPTIONS"]
        case .library, .book: ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]
        case .libraryEvents, .bookEvents: ["GET", "OPTIONS"]
        case .health, .metrics, .openAPI: ["GET", "HEAD", "OPTIONS"]
        }
    }
}
