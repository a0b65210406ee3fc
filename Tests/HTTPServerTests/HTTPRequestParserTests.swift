import Testing

@testable import HTTPServer

/// What a parser case must produce.
enum Expectation: Sendable, CustomStringConvertible {
    case request(method: String, target: String, body: String)
    case rejected(Int)

    var description: String {
        switch self {
        case .request(let method, let target, _): "\(method) \(target)"
        case .rejected(let status): "\(status)"
        }
    }
}

struct ParserCase: Sendable, CustomTestStringConvertible {
    let name: String
    let raw: String
    let expected: Expectation

    var testDescription: String { "\(name) → \(expected)" }

    init(_ name: String, _ raw: String, _ expected: Expectation) {
        self.name = name
        self.raw = raw
        self.expected = expected
    }
}

let validCases: [ParserCase] = [
    ParserCase(
        "simple GET", "GET /books HTTP/1.1\r\nHost: a\r\n\r\n", .request(method: "GET", target: "/books", body: "")),
    ParserCase(
        "query and headers", "GET /books?limit=5 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nX-Empty:\r\n\r\n",
        .request(method: "GET", target: "/books?limit=5", body: "")),
    ParserCase(
        "content-length body", "POST /books HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
        .request(method: "POST", target: "/books", body: "hello")),
    ParserCase(
        "chunked body",
        "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        .request(method: "POST", target: "/b", body: "hello world")),
    ParserCase(
        "chunk extension and trailer",
        "POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n3;name=value\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n",
        .request(method: "POST", target: "/b", body: "abc")),
    ParserCase("HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", .request(method: "GET", target: "/", body: "")),
    ParserCase(
        "leading empty line", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", .request(method: "GET", target: "/", body: "")),
    ParserCase(
        "absolute form", "GET http://example.com/books?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
        .request(method: "GET", target: "/books?x=1", body: "")),
    ParserCase(
        "asterisk form", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", .request(method: "OPTIONS", target: "*", body: "")),
    ParserCase(
        "zero content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
        .request(method: "POST", target: "/", body: "")),
    ParserCase(
        "tab and obs-text in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\tb\u{00E9}\r\n\r\n",
        .request(method: "GET", target: "/", body: "")),
]

let malformedCases: [ParserCase] = [
    ParserCase(
        "CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        .rejected(400)),
    ParserCase(
        "TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        .rejected(400)),
    ParserCase(
        "duplicate CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        .rejected(400)),
    ParserCase("CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", .rejected(400)),
    ParserCase("signed CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", .rejected(400)),
    ParserCase("negative CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\n", .rejected(400)),
    ParserCase("hex CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\n", .rejected(400)),
    ParserCase("huge CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", .rejected(413)),
    ParserCase("CL over 1 MiB", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n", .rejected(413)),
    ParserCase("unknown coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", .rejected(501)),
    ParserCase("xchunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", .rejected(501)),
    ParserCase(
        "chunked twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", .rejected(400)),
    ParserCase(
        "chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", .rejected(501)),
    ParserCase("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .rejected(400)),
    ParserCase(
        "bad chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .rejected(400)),
    ParserCase(
        "empty chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", .rejected(400)),
    ParserCase(
        "oversized chunk", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n",
        .rejected(413)),
    ParserCase(
        "chunk over limit", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n", .rejected(413)
    ),
    ParserCase(
        "chunk without CRLF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
        .rejected(400)),
    ParserCase("obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  continued\r\n\r\n", .rejected(400)),
    ParserCase("space before colon", "GET / HTTP/1.1\r\nHost: a\r\nX-A : 1\r\n\r\n", .rejected(400)),
    ParserCase("NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\u{0}2\r\n\r\n", .rejected(400)),
    ParserCase("control in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: \u{1}\r\n\r\n", .rejected(400)),
    ParserCase("DEL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: \u{7F}\r\n\r\n", .rejected(400)),
    ParserCase("bare CR", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", .rejected(400)),
    ParserCase("bare LF", "GET / HTTP/1.1\nHost: a\n\n", .rejected(400)),
    ParserCase("missing Host on 1.1", "GET / HTTP/1.1\r\n\r\n", .rejected(400)),
    ParserCase("duplicate Host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .rejected(400)),
    ParserCase("no colon", "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", .rejected(400)),
    ParserCase("empty header name", "GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", .rejected(400)),
    ParserCase("unknown version", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", .rejected(505)),
    ParserCase("HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", .rejected(505)),
    ParserCase("malformed version", "GET / HTTX/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("missing target", "GET HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("relative target", "GET books HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("asterisk with GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("absolute form without a host", "GET http:///books HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("absolute form with userinfo", "GET http://u@a/books HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase("non-ASCII target", "GET /caf\u{00E9} HTTP/1.1\r\nHost: a\r\n\r\n", .rejected(400)),
    ParserCase(
        "unsupported expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\nContent-Length: 1\r\n\r\na",
        .rejected(417)),
    ParserCase(
        "request line too long", "GET /" + String(repeating: "a", count: 33_000) + " HTTP/1.1\r\nHost: a\r\n\r\n",
        .rejected(414)),
    ParserCase(
        "head too large",
        "GET / HTTP/1.1\r\nHost: a\r\n"
            + String(repeating: "X-Pad: " + String(repeating: "b", count: 100) + "\r\n", count: 400) + "\r\n",
        .rejected(431)),
    ParserCase(
        "too many headers", "GET / HTTP/1.1\r\nHost: a\r\n" + (0..<101).map { "X-\($0): 1\r\n" }.joined() + "\r\n",
        .rejected(431)),
]

/// Feeds `bytes` to a fresh parser in the given pieces, returning the first request or error.
func parse(_ pieces: [[UInt8]]) -> Result<HTTPRequest?, HTTPParseError> {
    var parser = HTTPRequestParser()
    var buffer: [UInt8] = []
    var index = 0
    for piece in pieces {
        buffer += piece
        while true {
            do {
                switch try parser.parse(buffer, at: &index) {
                case .request(let request): return .success(request)
                case .expectsContinue: continue
                case .needMore: break
                }
            } catch {
                return .failure(error)
            }
            break
        }
    }
    return .success(nil)
}

func check(_ result: Result<HTTPRequest?, HTTPParseError>, _ expected: Expectation) {
    switch (result, expected) {
    case (.success(let request?), .request(let method, let target, let body)):
        #expect(request.method == method)
        #expect(request.target == target)
        #expect(String(decoding: request.body, as: UTF8.self) == body)
    case (.failure(let error), .rejected(let status)):
        #expect(error.status.code == status, "\(error.detail)")
    default:
        Issue.record("got \(result), expected \(expected)")
    }
}

@Suite struct HTTPRequestParserTests {
    @Test(arguments: validCases + malformedCases)
    func parsesWholeInput(_ testCase: ParserCase) {
        check(parse([Array(testCase.raw.utf8)]), testCase.expected)
    }

    @Test(arguments: validCases + malformedCases.filter { $0.raw.utf8.count < 2000 })
    func parsesInputSplitAtEveryByte(_ testCase: ParserCase) {
        let bytes = Array(testCase.raw.utf8)
        check(parse(bytes.map { [$0] }), testCase.expected)
        for split in 1..<bytes.count {
            check(parse([Array(bytes[..<split]), Array(bytes[split...])]), testCase.expected)
        }
    }

    @Test func parsesPipelinedRequestsInOrder() throws {
        var parser = HTTPRequestParser()
        let bytes = Array(
            "GET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: a\r\n\r\n"
                .utf8)
        var index = 0
        var targets: [String] = []
        while case .request(let request) = try parser.parse(bytes, at: &index) {
            targets.append(request.target)
        }
        #expect(targets == ["/a", "/b", "/c"])
        #expect(index == bytes.count)
    }

    @Test func reportsExpectContinueBeforeTheBody() throws {
        var parser = HTTPRequestParser()
        var bytes = Array("PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8)
        var index = 0
        guard case .expectsContinue = try parser.parse(bytes, at: &index) else {
            Issue.record("expected 100-continue")
            return
        }
        bytes += Array("ok".utf8)
        guard case .request(let request) = try parser.parse(bytes, at: &index) else {
            Issue.record("expected the request")
            return
        }
        #expect(request.body == Array("ok".utf8))
    }

    @Test(
        arguments: [
            ("GET http://evil.example/books?x=1 HTTP/1.1", "evil.example", "/books?x=1"),
            ("GET http://127.0.0.1:8080 HTTP/1.1", "127.0.0.1:8080", "/"),
            ("GET https://[::1]:9?q HTTP/1.1", "[::1]:9", "/?q"),
            ("GET /books HTTP/1.1", nil, "/books"),
        ] as [(String, String?, String)])
    func absoluteForm_KeepsItsAuthorityApartFromThePath(line: String, authority: String?, target: String) throws {
        let request = try #require(try parse([Array("\(line)\r\nHost: 127.0.0.1\r\n\r\n".utf8)]).get())
        #expect(request.authority == authority)
        #expect(request.target == target)
        #expect(request.headers["host"] == "127.0.0.1")
    }

    @Test func lowercasesHeaderNamesAndDecidesKeepAlive() throws {
        let close = try #require(
            try parse([Array("GET / HTTP/1.1\r\nHOST: a\r\nConnection: close\r\n\r\n".utf8)]).get())
        #expect(close.headers["host"] == "a")
        #expect(!close.keepAlive)
        let old = try #require(try parse([Array("GET / HTTP/1.0\r\n\r\n".utf8)]).get())
        #expect(!old.keepAlive)
        let oldKept = try #require(try parse([Array("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".utf8)]).get())
        #expect(oldKept.keepAlive)
    }
}
