import Foundation
import Glibc
import TestSupport
import Testing

/// `Idempotency-Key` on `POST`: the answer is kept with the write, so a retry gets it again and
/// creates nothing. Runs on both engines (`LIBRARY_TEST_ENGINE=postgres` in scripts/postgres-tests.sh).
@Suite struct IdempotencyTests {
    let live = try! LiveServer()

    func items(_ path: String) throws -> [[String: Any]] {
        try live.request("GET", path).json["items"] as? [[String: Any]] ?? []
    }

    @Test func aRetryWithTheSameKey_GetsTheFirstAnswerAndCreatesNothing() throws {
        let library = try live.createLibrary()
        let body = #"{"libraryId":"\#(library)","title":"Dune"}"#
        let first = try live.request("POST", "/books", headers: ["Idempotency-Key": "order-1"], body: body)
        #expect(first.status == 201)
        let again = try live.request("POST", "/books", headers: ["Idempotency-Key": "order-1"], body: body)
        #expect(again.status == 201)
        #expect(again.body == first.body)
        #expect(again.header("location") == first.header("location"))
        #expect(again.header("etag") == first.header("etag"))
        #expect(again.header("x-request-id") != first.header("x-request-id"), "each answer has its own request id")
        #expect(try items("/books").count == 1)
        // Another key is another request: it creates.
        let other = try live.request("POST", "/books", headers: ["Idempotency-Key": "order-2"], body: body)
        #expect(other.status == 201 && other.json["id"] as? String != first.json["id"] as? String)
        #expect(try items("/books").count == 2)
    }

    @Test func theSameKeyWithAnotherRequest_Is422AndWritesNothing() throws {
        let first = try live.request("POST", "/libraries", headers: ["Idempotency-Key": "k"], body: #"{"name":"A"}"#)
        #expect(first.status == 201)
        let otherBody = try live.request(
            "POST", "/libraries", headers: ["Idempotency-Key": "k"], body: #"{"name":"B"}"#)
        #expect(otherBody.status == 422)
        #expect((otherBody.json["errors"] as? [[String: Any]])?.first?["field"] as? String == "Idempotency-Key")
        let library = try #require(first.json["id"] as? String)
        let otherPath = try live.request(
            "POST", "/libraries/\(library)/books", headers: ["Idempotency-Key": "k"], body: #"{"name":"A"}"#)
        #expect(otherPath.status == 422)
        #expect(try items("/libraries").count == 1)
        #expect(try items("/books").isEmpty)
    }

    @Test(arguments: ["", String(repeating: "k", count: 256), "with space", "caf\u{E9}"])
    func aMalformedKey_Is400(key: String) throws {
        let response = try live.request("POST", "/libraries", headers: ["Idempotency-Key": key], body: #"{"name":"A"}"#)
        #expect(response.status == 400)
        #expect(try items("/libraries").isEmpty)
    }

    @Test func refusals_AreNotKept() throws {
        let refused = try live.request(
            "POST", "/books", headers: ["Idempotency-Key": "late"], body: #"{"libraryId":"\#(UUID())","title":"X"}"#)
        #expect(refused.status == 422 || refused.status == 404)
        let library = try live.createLibrary()
        let body = #"{"libraryId":"\#(library)","title":"X"}"#
        #expect(try live.request("POST", "/books", headers: ["Idempotency-Key": "late"], body: body).status == 201)
    }

    /// The case the key is for: the answer to a POST is lost (here the client hangs up before
    /// reading it); the client sends it again and learns what the first one created.
    @Test func aPostRetriedAfterItsAnswerWasLost_CreatesOneBook() throws {
        let library = try live.createLibrary()
        let body = #"{"libraryId":"\#(library)","title":"Once"}"#
        let lost = try live.connect()
        try lost.send(
            "POST /books HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: lost-1\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        shutdown(lost.fd, Int32(SHUT_RDWR))  // the answer is never read
        var retried: TestResponse?
        for _ in 0..<50 {  // the first may still be committing: a retry waits for it or replays it
            retried = try live.request("POST", "/books", headers: ["Idempotency-Key": "lost-1"], body: body)
            if try items("/books").count == 1 { break }
            usleep(20_000)
        }
        #expect(retried?.status == 201)
        let books = try items("/books")
        #expect(books.count == 1)
        #expect(books.first?["id"] as? String == retried?.json["id"] as? String)
    }
}
