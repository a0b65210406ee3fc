import Foundation
import LibraryAPI
import TestSupport
import Testing

/// Who may call: allowed hosts against DNS rebinding, and the optional read token.
@Suite struct AccessControlTests {
    @Test(arguments: [
        ("127.0.0.1:8080", 200), ("127.0.0.1", 200), ("localhost:1", 200), ("LOCALHOST.", 200), ("[::1]:80", 200),
        ("evil.example", 421), ("evil.example:8080", 421), ("127.0.0.1.evil.example", 421), ("[::1", 421),
        ("", 421), ("localhostx", 421),
    ])
    func host_MustBeAnAllowedName(host: String, status: Int) throws {
        let live = try LiveServer(allowedHosts: ["127.0.0.1", "localhost", "[::1]"])
        let connection = try live.connect()
        try connection.send("GET /libraries HTTP/1.1\r\nHost: \(host)\r\n\r\n")
        let response = try connection.readResponse()
        #expect(response.status == status, "Host: \(host)")
        if status == 421 {
            #expect(response.header("content-type") == "application/problem+json")
            #expect(!response.text.contains("evil"), "the problem does not echo the Host")
        }
    }

    /// RFC 9112 §3.2.2: an absolute-form target's authority replaces `Host`, so it is what the
    /// allowed hosts are checked against.
    @Test(arguments: [
        ("http://evil.example/libraries", "127.0.0.1", 421), ("http://127.0.0.1:9/libraries", "evil.example", 200),
        ("http://LOCALHOST/libraries", "127.0.0.1", 200), ("https://evil.example:443/healthz", "127.0.0.1", 200),
    ])
    func absoluteFormTarget_IsCheckedInsteadOfHost(target: String, host: String, status: Int) throws {
        let live = try LiveServer(allowedHosts: ["127.0.0.1", "localhost"])
        let connection = try live.connect()
        try connection.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
        #expect(try connection.readResponse().status == status, "\(target) with Host: \(host)")
    }

    @Test func twoAuthorizationFields_AreABadRequest() throws {
        let live = try LiveServer(token: "write-token")
        let connection = try live.connect()
        let body = #"{"name":"twice"}"#
        try connection.send(
            "POST /libraries HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer write-token\r\n"
                + "Authorization: Bearer other\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let response = try connection.readResponse()
        #expect(response.status == 400)
        #expect(!response.text.contains("write-token"))
        #expect((try live.request("GET", "/libraries").json["items"] as? [Any])?.isEmpty == true)
    }

    @Test func misdirectedWrites_ChangeNothing() throws {
        let live = try LiveServer(allowedHosts: ["localhost"])
        let connection = try live.connect()
        let body = #"{"name":"rebound"}"#
        try connection.send(
            "POST /libraries HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        #expect(try connection.readResponse().status == 421)
        let check = try live.connect()
        try check.send("GET /libraries HTTP/1.1\r\nHost: localhost:9\r\n\r\n")
        #expect((try check.readResponse().json["items"] as? [Any])?.isEmpty == true)
        // Health probes may name the server by any address.
        let probe = try live.connect()
        try probe.send("GET /healthz HTTP/1.1\r\nHost: 10.0.0.8:8080\r\n\r\n")
        #expect(try probe.readResponse().status == 200)
    }

    @Test func defaultAllowedHosts_FollowTheListenAddress() {
        let loopback = AllowedHosts.defaults(listenHost: "127.0.0.1")
        #expect(loopback.permits("localhost:8080") && loopback.permits("127.0.0.1") && loopback.permits("[::1]:1"))
        #expect(!loopback.permits("evil.example"))
        #expect(AllowedHosts.defaults(listenHost: "0.0.0.0").permits("anything.example"))
        #expect(AllowedHosts.defaults(listenHost: "::").permits("anything.example"))
        let specific = AllowedHosts.defaults(listenHost: "192.0.2.7")
        #expect(specific.permits("192.0.2.7:80") && !specific.permits("localhost"))
        #expect(AllowedHosts(["*"]).permits("anything.example"))
        #expect(AllowedHosts(["api.example:8080"]).permits("API.example:9"))
    }

    /// Every route with a method that reads; the write routes keep their own table in
    /// OperationsTests.
    static func reads(library: String, book: String) -> [(String, String)] {
        [
            ("GET", "/libraries"), ("HEAD", "/libraries"), ("GET", "/libraries/\(library)"),
            ("HEAD", "/libraries/\(library)"), ("GET", "/libraries/\(library)/books"),
            ("HEAD", "/libraries/\(library)/books"), ("GET", "/books"), ("HEAD", "/books"),
            ("GET", "/books/\(book)"), ("HEAD", "/books/\(book)"), ("GET", "/libraries/\(library)/events"),
            ("GET", "/books/\(book)/events"), ("GET", "/metrics"), ("HEAD", "/metrics"),
        ]
    }

    @Test func readToken_GuardsEveryReadRouteAndStream() throws {
        let live = try LiveServer(token: "writer-secret", readToken: "reader-secret")
        let write = ["Authorization": "Bearer writer-secret"]
        let library = try #require(
            try live.request("POST", "/libraries", headers: write, body: #"{"name":"x"}"#).json["id"] as? String)
        let book = try #require(
            try live.request("POST", "/books", headers: write, body: #"{"libraryId":"\#(library)","title":"T"}"#)
                .json["id"] as? String)
        for (method, path) in Self.reads(library: library, book: book) {
            for headers in [[:], ["Authorization": "Bearer reader-secreT"], ["Authorization": "Basic eDp5"]] {
                let response = try live.connect().request(method, path, headers: headers)
                #expect(response.status == 401, "\(method) \(path) \(headers)")
                #expect(response.header("www-authenticate")?.hasPrefix("Bearer") == true)
                #expect(!response.text.contains("secret"))
            }
            for token in ["reader-secret", "writer-secret"] {
                let connection = try live.connect()
                try connection.send(
                    "\(method) \(path) HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer \(token)\r\n\r\n")
                #expect(try connection.readHead().status == 200, "\(method) \(path) with \(token)")
            }
        }
        // The read token grants no writes.
        let denied = try live.request(
            "PATCH", "/books/\(book)", headers: ["Authorization": "Bearer reader-secret"], body: #"{"title":"U"}"#)
        #expect(denied.status == 401)
        // Open: health checks, the spec, and CORS preflights.
        #expect(try live.request("GET", "/healthz").status == 200)
        #expect(try live.request("GET", "/openapi.yaml").status == 200)
        #expect(try live.request("OPTIONS", "/books").status == 204)
    }

    @Test func readToken_LeavesCORSPreflightsOpen() throws {
        let live = try LiveServer(readToken: "reader-secret", cors: "https://app.example")
        let preflight = try live.request(
            "OPTIONS", "/books",
            headers: [
                "Origin": "https://app.example", "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "authorization",
            ]
        )
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-headers")?.contains("Authorization") == true)
        let get = try live.request(
            "GET", "/books", headers: ["Origin": "https://app.example", "Authorization": "Bearer reader-secret"])
        #expect(get.status == 200)
        #expect(get.header("access-control-allow-origin") == "https://app.example")
    }

    @Test func readToken_InTheQueryOpensStreamsOnly() throws {
        let live = try LiveServer(readToken: "reader-secret")
        let library = try live.createLibrary()
        let stream = try live.events("/libraries/\(library)/events?access_token=reader-secret")
        #expect(stream.head.status == 200)
        #expect(try stream.next()?.event == "snapshot")
        let wrong = try live.request("GET", "/libraries/\(library)/events?access_token=reader-secreT")
        #expect(wrong.status == 401)
        #expect(!wrong.text.contains("reader-secre"))
        #expect(try live.request("GET", "/libraries?access_token=reader-secret").status == 401)
        #expect(try live.request("GET", "/metrics?access_token=reader-secret").status == 401)
    }
}
