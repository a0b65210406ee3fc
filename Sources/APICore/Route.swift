import HTTPServer
import LibraryDomain

/// Every route of the API, with the ids its path carries.
package enum Route: Sendable, Equatable {
    case libraries
    case library(String)
    case libraryBooks(String)
    case libraryEvents(String)
    case books
    case book(String)
    case bookEvents(String)
    /// `/libraries/events`: the collection of libraries.
    case librariesEvents
    /// `/books/events`: the books matching the query's filters.
    case booksEvents
    /// `/events`: many watches on one stream.
    case events
    /// `/events/{streamId}`: the watches of an open `POST /events` stream, changed while it runs.
    case eventStream(String)
    case health
    case metrics
    case openAPI
    /// The browser console: `index.html` at `/`, its other files at `/console/NAME`.
    case console(String)

    /// Matches a request path; 404 for no route, 400 for a malformed id or escape.
    ///
    /// Segments are compared as slices of the path; only the id handed to a handler becomes a
    /// `String`. A path with a `%` escape has every segment decoded first.
    package init(path: Substring) throws(APIError) {
        guard path != "*" else { throw .notFound("No route matches *.") }
        if path == "/" {
            self = .console("index.html")
            return
        }
        let segments =
            PathSegments.hasEscape(path) ? try PathSegments(decoding: path) : PathSegments(path)
        func id(_ text: Substring, _ kind: String) throws(APIError) -> String {
            guard let id = Identifier.canonical(text) else {
                throw .badRequest("\"\(text)\" is not a valid \(kind) id (a UUID).")
            }
            return id
        }
        guard !segments.hasEmpty else { throw Self.unknown(path) }
        let (first, second, third) = (segments.first, segments.second, segments.third)
        let matches = PathSegments.matches
        switch segments.count {
        case 1 where matches(first, "libraries"): self = .libraries
        case 1 where matches(first, "books"): self = .books
        case 1 where matches(first, "healthz"): self = .health
        case 1 where matches(first, "metrics"): self = .metrics
        case 1 where matches(first, "openapi.yaml"): self = .openAPI
        case 1 where matches(first, "events"): self = .events
        case 2 where matches(first, "libraries") && matches(second, "events"): self = .librariesEvents
        case 2 where matches(first, "books") && matches(second, "events"): self = .booksEvents
        case 2 where matches(first, "console"): self = .console(String(second))
        case 2 where matches(first, "events"): self = .eventStream(try id(second, "stream"))
        case 2 where matches(first, "libraries"): self = .library(try id(second, "library"))
        case 2 where matches(first, "books"): self = .book(try id(second, "book"))
        case 3 where matches(first, "libraries") && matches(third, "books"):
            self = .libraryBooks(try id(second, "library"))
        case 3 where matches(first, "libraries") && matches(third, "events"):
            self = .libraryEvents(try id(second, "library"))
        case 3 where matches(first, "books") && matches(third, "events"): self = .bookEvents(try id(second, "book"))
        default: throw Self.unknown(path)
        }
    }

    private static func unknown(_ path: Substring) -> APIError {
        .notFound("No route matches \(path.prefix(200)).")
    }

    /// The path template, used as the `route` label of metrics and logs.
    package var template: String {
        switch self {
        case .libraries: "/libraries"
        case .library: "/libraries/{id}"
        case .libraryBooks: "/libraries/{id}/books"
        case .libraryEvents: "/libraries/{id}/events"
        case .books: "/books"
        case .book: "/books/{id}"
        case .bookEvents: "/books/{id}/events"
        case .librariesEvents: "/libraries/events"
        case .booksEvents: "/books/events"
        case .events: "/events"
        case .eventStream: "/events/{streamId}"
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.yaml"
        case .console: "/console"
        }
    }

    /// The methods this route answers (OPTIONS is answered everywhere): shared lists, never built
    /// per request.
    package var methods: [String] {
        switch self {
        case .libraries, .books, .libraryBooks: Self.collectionMethods
        case .library, .book: Self.resourceMethods
        case .libraryEvents, .bookEvents, .librariesEvents, .booksEvents: Self.streamMethods
        case .events: Self.watchMethods
        case .eventStream: Self.streamControlMethods
        case .health, .metrics, .openAPI, .console: Self.readOnlyMethods
        }
    }

    /// Whether `method` is one of `methods`, decided without touching the list.
    package func allows(_ method: String) -> Bool {
        switch (self, method) {
        case (.eventStream, "POST"), (.eventStream, "OPTIONS"): true
        case (.eventStream, _): false
        case (_, "GET"), (_, "OPTIONS"): true
        case (.events, "POST"): true
        case (.libraryEvents, _), (.bookEvents, _), (.librariesEvents, _), (.booksEvents, _), (.events, _): false
        case (_, "HEAD"): true
        case (.libraries, "POST"), (.books, "POST"), (.libraryBooks, "POST"): true
        case (.library, "PUT"), (.library, "PATCH"), (.library, "DELETE"): true
        case (.book, "PUT"), (.book, "PATCH"), (.book, "DELETE"): true
        default: false
        }
    }

    /// `methods` as the value of an `Allow` header.
    package var allow: String {
        switch self {
        case .libraries, .books, .libraryBooks: Self.collectionAllow
        case .library, .book: Self.resourceAllow
        case .libraryEvents, .bookEvents, .librariesEvents, .booksEvents: Self.streamAllow
        case .events: Self.watchAllow
        case .eventStream: Self.streamControlAllow
        case .health, .metrics, .openAPI, .console: Self.readOnlyAllow
        }
    }

    private static let collectionMethods = ["GET", "HEAD", "POST", "OPTIONS"]
    private static let resourceMethods = ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]
    private static let streamMethods = ["GET", "OPTIONS"]
    private static let readOnlyMethods = ["GET", "HEAD", "OPTIONS"]
    private static let watchMethods = ["GET", "POST", "OPTIONS"]
    private static let watchAllow = watchMethods.joined(separator: ", ")
    private static let streamControlMethods = ["POST", "OPTIONS"]
    private static let streamControlAllow = streamControlMethods.joined(separator: ", ")
    private static let collectionAllow = collectionMethods.joined(separator: ", ")
    private static let resourceAllow = resourceMethods.joined(separator: ", ")
    private static let streamAllow = streamMethods.joined(separator: ", ")
    private static let readOnlyAllow = readOnlyMethods.joined(separator: ", ")
}
