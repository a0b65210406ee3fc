import CAllocationCounter
import HTTPServer
import Testing

@testable import APICore
@testable import LibraryAPI

/// How many heap allocations a typical `GET /books/{id}` costs from bytes to a route: the head is
/// parsed, framed and routed, and the checks that run before any handler (Host, method) are made.
///
/// Counted with the per-thread malloc counter of `CAllocationCounter`; a count, never a timing.
@Suite struct RequestHeadAllocationTests {
    static let bookID = "0b7e5c1e-3f0a-4d5e-9a6b-2c1d0e9f8a7b"
    static let head = Array(
        ("GET /books/\(bookID) HTTP/1.1\r\n"
            + "Host: 127.0.0.1:8080\r\n"
            + "User-Agent: Mozilla/5.0 (X11; Linux x86_64) library-tests/1.0\r\n"
            + "Accept: application/json\r\n"
            + "Accept-Encoding: gzip, deflate\r\n"
            + "Connection: keep-alive\r\n"
            + "X-Request-ID: 4b1c2d3e-aaaa-bbbb-cccc-0123456789ab\r\n"
            + "\r\n").utf8)

    /// Parses and routes `head` `count` times on this thread, returning the allocations made meanwhile.
    static func allocations(count: Int) throws -> (allocations: Int, route: Route?, request: HTTPRequest?) {
        var parser = HTTPRequestParser()
        var lastRoute: Route?
        var lastRequest: HTTPRequest?
        allocation_counter_start()
        defer { _ = allocation_counter_stop() }
        for _ in 0..<count {
            var index = 0
            guard case .request(let request) = try parser.parse(head, at: &index) else { break }
            let route = try Route(path: request.path)
            guard route.allows(request.method), request.headers["host"] != nil else { break }
            lastRoute = route
            lastRequest = request
        }
        return (allocation_counter_stop(), lastRoute, lastRequest)
    }

    /// `allows` answers as the lists do, for every route and method (and a few that are none).
    @Test(arguments: [
        Route.libraries, .library(bookID), .libraryBooks(bookID), .libraryEvents(bookID), .books, .book(bookID),
        .bookEvents(bookID), .health, .metrics, .openAPI,
    ])
    func allows_AgreesWithMethods(route: Route) {
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "get", "BREW"] {
            #expect(route.allows(method) == route.methods.contains(method), "\(route.template) \(method)")
        }
        #expect(route.allow == route.methods.joined(separator: ", "))
    }

    @Test(.enabled(if: allocation_counter_is_available(), "the allocator is a sanitizer's"))
    func counter_CountsAllocationsOnThisThread() {
        final class Box { var value = 0 }
        allocation_counter_start()
        var boxes: [Box] = []
        for _ in 0..<10 { boxes.append(Box()) }
        let counted = allocation_counter_stop()
        #expect(boxes.count == 10)
        #expect(counted >= 10)
    }

    @Test(.enabled(if: allocation_counter_is_available(), "the allocator is a sanitizer's"))
    func typicalGet_ParsesAndRoutesWithAtMostThreeAllocations() throws {
        _ = try Self.allocations(count: 1)  // warms up lazily initialized globals
        let requests = 1000
        let (allocations, route, request) = try Self.allocations(count: requests)
        #expect(route == .book(Self.bookID))
        #expect(request?.keepAlive == true)
        #expect(request?.headers["user-agent"] == "Mozilla/5.0 (X11; Linux x86_64) library-tests/1.0")
        let perRequest = Double(allocations) / Double(requests)
        print("allocations per request head: \(perRequest)")
        // The head's storage, the target string and the id handed to the handler: 3, also in this
        // unoptimized build. Before the head was parsed into slices, the same loop made 1,539.
        #expect(perRequest <= 3)
    }
}
