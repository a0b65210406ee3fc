import Testing

@testable import APICore

/// `Route(path:)` from the path alone: every route, escapes decoded before matching, and the
/// answers (404, 400) for paths that match nothing.
@Suite struct RouteTests {
    static let id = "0b7e5c1e-3f0a-4d5e-9a6b-2c1d0e9f8a7b"
    static let upper = id.uppercased()

    static let matches: [(String, Route)] = [
        ("/libraries", .libraries),
        ("/books", .books),
        ("/healthz", .health),
        ("/metrics", .metrics),
        ("/openapi.yaml", .openAPI),
        ("/libraries/\(id)", .library(id)),
        ("/books/\(id)", .book(id)),
        ("/libraries/\(id)/books", .libraryBooks(id)),
        ("/libraries/\(id)/events", .libraryEvents(id)),
        ("/books/\(id)/events", .bookEvents(id)),
        ("/books/\(upper)", .book(id)),
        ("/%62ooks", .books),
        ("/books/%30b7e5c1e-3f0a-4d5e-9a6b-2c1d0e9f8a7b", .book(id)),
        ("/libraries/\(id)/%65vents", .libraryEvents(id)),
        ("/", .console("index.html")), ("/console/app.js", .console("app.js")),
    ]

    @Test(arguments: matches)
    func path_MatchesItsRoute(path: String, route: Route) throws {
        #expect(try Route(path: path[...]) == route)
    }

    static let refusals: [(String, Int)] = [
        ("*", 404), ("", 404), ("/console", 404), ("/console/", 404), ("/console/a/b", 404), ("books", 404),
        ("/books/", 404), ("//books", 404),
        ("/books/\(id)/", 404), ("/books/\(id)/events/x", 404), ("/Books", 404), ("/unknown", 404),
        ("/libraries/\(id)/other", 404), ("/books/not-a-uuid", 400), ("/libraries/x/books", 400),
        ("/books/%zz", 400), ("/x/%zz", 400), ("/books/%E9", 400), ("/books//%zz", 400),
    ]

    @Test(arguments: refusals)
    func path_IsRefused(path: String, status: Int) {
        #expect {
            _ = try Route(path: path[...])
        } throws: { error in
            (error as? APIError)?.status.code == status
        }
    }
}
