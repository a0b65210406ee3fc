import Testing

@testable import HTTPServer

/// Request header fields as slices of the head: lookups ignore ASCII case, framing tokens are
/// compared as ASCII (RFC 9110 §5.6.2), never through Unicode case mapping.
@Suite struct HTTPRequestHeadersTests {
    static func parse(_ text: String) throws -> HTTPRequest? {
        var parser = HTTPRequestParser()
        var index = 0
        guard case .request(let request) = try parser.parse(Array(text.utf8), at: &index) else { return nil }
        return request
    }

    @Test func lookup_IgnoresCase_AndNamesAreLowercasedInPlace() throws {
        let request = try #require(
            try Self.parse("GET / HTTP/1.1\r\nHoSt: a\r\nX-Thing: \t v w \t\r\nx-thing: 2\r\n\r\n"))
        #expect(request.headers["HOST"] == "a")
        #expect(request.headers["x-THING"] == "v w")
        #expect(request.headers.values("X-Thing") == ["v w", "2"])
        #expect(request.headers.contains("host"))
        #expect(!request.headers.contains("hos"))
        #expect(request.headers.fields.map(\.name) == ["host", "x-thing", "x-thing"])
        #expect(request.headers == HTTPRequestHeaders([("Host", "a"), ("x-thing", "v w"), ("X-THING", "2")]))
    }

    @Test func framingTokens_AreComparedAsASCII() throws {
        // U+212A KELVIN SIGN lowercases to "k": "chun\u{212A}ed" is not "chunked" to a proxy either.
        #expect(throws: HTTPParseError.self) {
            try Self.parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chun\u{212A}ed\r\n\r\n")
        }
        let chunked = try Self.parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , CHUNKED ,\r\n\r\n0\r\n\r\n")
        #expect(chunked?.method == "POST")
        let kelvin = try #require(try Self.parse("GET / HTTP/1.0\r\nConnection: \u{212A}eep-alive\r\n\r\n"))
        #expect(!kelvin.keepAlive)
        let keepAlive = try #require(try Self.parse("GET / HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n"))
        #expect(keepAlive.keepAlive)
        let close = try #require(try Self.parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive,CLOSE\r\n\r\n"))
        #expect(!close.keepAlive)
    }
}
