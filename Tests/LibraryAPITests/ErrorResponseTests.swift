import Foundation
import SQLite
import TestSupport
import Testing

@Suite struct ErrorResponseTests {
    let live = try! LiveServer()

    /// Checks the problem+json shape and returns the document.
    @discardableResult
    func problem(_ response: TestResponse, _ status: Int, sourceLocation: SourceLocation = #_sourceLocation) -> [String:
        Any]
    {
        #expect(response.status == status, "\(response.text)", sourceLocation: sourceLocation)
        #expect(response.header("content-type") == "application/problem+json", sourceLocation: sourceLocation)
        let json = response.json
        #expect(json["status"] as? Int == status, sourceLocation: sourceLocation)
        #expect(
            (json["type"] as? String)?.hasPrefix("urn:library-server:problem:") == true, sourceLocation: sourceLocation)
        #expect(json["title"] is String, sourceLocation: sourceLocation)
        #expect(json["detail"] is String, sourceLocation: sourceLocation)
        return json
    }

    @Test func malformedJSON_Is400() throws {
        problem(try live.request("POST", "/libraries", body: #"{"name": "x""#), 400)
        problem(try live.request("POST", "/libraries", body: #"{"name":"a","name":"b"}"#), 400)
        problem(try live.request("POST", "/libraries", body: String(repeating: "[", count: 100_000)), 400)
        problem(try live.request("POST", "/libraries", body: ""), 400)
        problem(try live.request("POST", "/libraries", body: "{\"name\":\"\\ud800\"}"), 400)
    }

    @Test func malformedIdAndQuery_Are400() throws {
        problem(try live.request("GET", "/books/not-a-uuid"), 400)
        problem(try live.request("GET", "/libraries/%zz"), 400)
        problem(try live.request("GET", "/books?limit=0"), 400)
        problem(try live.request("GET", "/books?limit=501"), 400)
        problem(try live.request("GET", "/books?limit=ten"), 400)
        problem(try live.request("GET", "/books?limit=1&limit=2"), 400)
        problem(try live.request("GET", "/books?cursor=garbage"), 400)
        problem(try live.request("GET", "/books?author=%E0%A4"), 400)
        problem(try live.request("GET", "/books/\(UUID().uuidString)", headers: ["If-None-Match": "nonsense"]), 400)
    }

    @Test func unknownResourceOrRoute_Is404() throws {
        problem(try live.request("GET", "/books/\(UUID().uuidString)"), 404)
        problem(try live.request("PATCH", "/libraries/\(UUID().uuidString)", body: "{}"), 404)
        problem(try live.request("GET", "/nothing/here"), 404)
    }

    @Test func wrongMethod_Is405WithAllow() throws {
        let response = try live.request("DELETE", "/books")
        problem(response, 405)
        #expect(response.header("allow") == "GET, HEAD, POST, OPTIONS")
    }

    @Test func bodyOverOneMebibyte_Is413() throws {
        let big = #"{"name":""# + String(repeating: "a", count: 1_048_577) + #""}"#
        problem(try live.request("POST", "/libraries", body: big), 413)
    }

    @Test func nonJSONBody_Is415() throws {
        problem(try live.request("POST", "/libraries", headers: ["Content-Type": "text/plain"], body: "name=x"), 415)
        problem(
            try live.request(
                "POST", "/libraries", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "name=x"),
            415)
        // Without Content-Type a browser page could send it cross-origin with no preflight.
        var connection = try live.connect()
        try connection.send("POST /libraries HTTP/1.1\r\nHost: test\r\nContent-Length: 12\r\n\r\n{\"name\":\"x\"}")
        problem(try connection.readResponse(), 415)
        connection = try live.connect()
        try connection.send(
            "PATCH /libraries/3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n{}"
        )
        problem(try connection.readResponse(), 415)
        #expect((try live.request("GET", "/libraries").json["items"] as? [Any])?.isEmpty == true)
    }

    @Test func invalidValues_Are422WithFieldErrors() throws {
        let library = try live.createLibrary()
        let unknown = problem(try live.request("POST", "/libraries", body: #"{"name":"x","colour":"red"}"#), 422)
        #expect((unknown["errors"] as? [[String: String]])?.first?["field"] == "colour")
        let invalid = problem(
            try live.request(
                "POST", "/books",
                body: #"{"libraryId":"\#(library)","title":"","isbn":"978-0-441-17271-0","publishedYear":12000}"#),
            422
        )
        #expect(
            Set((invalid["errors"] as? [[String: String]])?.compactMap { $0["field"] } ?? []) == [
                "title", "isbn", "publishedYear",
            ])
        problem(
            try live.request("POST", "/books", body: #"{"libraryId":"\#(library)","title":"t","publishedYear":1e400}"#),
            422)
        problem(
            try live.request("POST", "/books", body: #"{"libraryId":"\#(library)","title":"t","available":"yes"}"#), 422
        )
        problem(try live.request("PATCH", "/libraries/\(library)", body: #"{"name":null}"#), 422)
        problem(try live.request("POST", "/libraries", body: "[1,2]"), 422)
        #expect(try live.request("GET", "/libraries/\(library)").json["name"] as? String == "Central")
    }

    @Test func manyUnknownMembers_AreA422OfBoundedSize() throws {
        let members = (0..<60_000).map { #""m\#($0)":0"# }.joined(separator: ",")
        let body = #"{"name":"x","# + members + "}"
        let response = try live.request("POST", "/libraries", body: body)
        let json = problem(response, 422)
        #expect((json["errors"] as? [[String: String]])?.count == 20)
        #expect(json["errorsOmitted"] as? Int == 59_980)
        #expect((json["detail"] as? String)?.hasSuffix("and 59980 more.") == true)
        #expect(response.body.count < 4_000)
        let longName = #"{"name":"x",""# + String(repeating: "k", count: 500_000) + #"":1}"#
        let long = try live.request("POST", "/libraries", body: longName)
        problem(long, 422)
        #expect(long.body.count < 1_000)
    }

    @Test func oversizedHead_Is431() throws {
        let response = try live.request("GET", "/books", headers: ["X-Big": String(repeating: "b", count: 41_000)])
        problem(response, 431)
    }

    @Test func lockedDatabase_Is503() throws {
        try withTemporaryFile { path in
            let live = try LiveServer(path: path, busyTimeoutMilliseconds: 50)
            let blocker = try Connection(path: path)
            try blocker.execute("BEGIN IMMEDIATE")
            let response = try live.request("POST", "/libraries", body: #"{"name":"x"}"#)
            problem(response, 503)
            #expect(response.header("retry-after") == "1")
            problem(try live.request("GET", "/healthz"), 503)
            #expect(try live.request("GET", "/libraries").status == 200, "readers do not need the write lock")
            try blocker.execute("ROLLBACK")
            #expect(try live.request("POST", "/libraries", body: #"{"name":"x"}"#).status == 201)
            #expect(try live.request("GET", "/healthz").status == 200)
        }
    }

    @Test func responses_EchoOrGenerateARequestID() throws {
        #expect(
            try live.request("GET", "/healthz", headers: ["X-Request-ID": "abc-123"]).header("x-request-id")
                == "abc-123")
        #expect(try live.request("GET", "/healthz").header("x-request-id")?.count == 36)
    }
}

func withTemporaryFile(_ body: (String) throws -> Void) throws {
    let directory = NSTemporaryDirectory() + "library-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try body(directory + "/library.sqlite")
}
