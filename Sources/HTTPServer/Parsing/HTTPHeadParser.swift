/// How the body of a request is delimited.
enum BodyFraming: Equatable {
    case none
    case length(Int)
    case chunked
}

/// Parses a complete request head (request line and header fields, CRLF-separated, without the
/// final empty line) and decides the body framing, rejecting every ambiguous shape.
enum HTTPHeadParser {
    static func parse(_ head: ArraySlice<UInt8>, limits: HTTPParserLimits) throws(HTTPParseError) -> (
        HTTPRequest, BodyFraming
    ) {
        var lines = head.split(separator: 13, omittingEmptySubsequences: false).map { line in
            line.first == 10 ? line.dropFirst() : line
        }
        let requestLine = lines.removeFirst()
        let (method, target, version) = try Self.requestLine(requestLine)
        guard lines.count <= limits.maxHeaderCount else {
            throw HTTPParseError(.requestHeaderFieldsTooLarge, "More than \(limits.maxHeaderCount) header fields.")
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(lines.count)
        for line in lines {
            headers.append(try field(line))
        }
        var request = HTTPRequest(method: method, target: target, version: version, headers: HTTPHeaders(headers))
        let framing = try Self.framing(of: request, limits: limits)
        request.keepAlive = Self.keepAlive(request)
        return (request, framing)
    }

    /// `method SP request-target SP HTTP-version`, each part checked.
    static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String, HTTPVersion) {
        let parts = line.split(separator: 32, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw .bad("The request line must be: method, target and version, one space apart.")
        }
        let method = parts[0]
        let target = parts[1]
        let version = parts[2]
        guard !method.isEmpty, method.allSatisfy(isTokenByte) else { throw .bad("The method is not a valid token.") }
        guard !target.isEmpty, target.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw .bad("The request target is empty or has a space, control or non-ASCII byte.")
        }
        let versionBytes = Array(version)
        guard versionBytes.count == 8, versionBytes.starts(with: Array("HTTP/".utf8)),
            isDigit(versionBytes[5]), versionBytes[6] == UInt8(ascii: "."), isDigit(versionBytes[7])
        else { throw .bad("The HTTP version is malformed.") }
        let parsedVersion: HTTPVersion
        switch (versionBytes[5], versionBytes[7]) {
        case (UInt8(ascii: "1"), UInt8(ascii: "1")): parsedVersion = .http1_1
        case (UInt8(ascii: "1"), UInt8(ascii: "0")): parsedVersion = .http1_0
        default:
            throw HTTPParseError(.httpVersionNotSupported, "Only HTTP/1.1 and HTTP/1.0 are supported.")
        }
        var targetString = String(decoding: target, as: UTF8.self)
        if targetString.hasPrefix("http://") || targetString.hasPrefix("https://") {
            // absolute-form (RFC 9112 §3.2.2): keep the path and query.
            let afterScheme = targetString.dropFirst(targetString.hasPrefix("https://") ? 8 : 7)
            let pathStart = afterScheme.firstIndex { $0 == "/" || $0 == "?" }
            targetString =
                pathStart.map {
                    afterScheme[$0...].hasPrefix("?") ? "/" + afterScheme[$0...] : String(afterScheme[$0...])
                } ?? "/"
        } else if targetString == "*" {
            guard method.elementsEqual("OPTIONS".utf8) else { throw .bad("The target * is only for OPTIONS.") }
        } else if !targetString.hasPrefix("/") {
            throw .bad("The request target must start with /.")
        }
        return (String(decoding: method, as: UTF8.self), targetString, parsedVersion)
    }

    /// `field-name ":" OWS field-value OWS`, with the name lowercased.
    static func field(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (name: String, value: String) {
        guard let first = line.first, first != 32, first != 9 else {
            throw .bad("Obsolete line folding (a header line starting with whitespace) is not allowed.")
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .bad("A header line has no colon.") }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty else { throw .bad("A header field has an empty name.") }
        guard name.allSatisfy(isTokenByte) else {
            if name.last == 32 || name.last == 9 {
                throw .bad("Whitespace between a header name and the colon is not allowed.")
            }
            throw .bad("A header field name is not a valid token.")
        }
        var value = line[(colon + 1)...]
        while let byte = value.first, byte == 32 || byte == 9 { value = value.dropFirst() }
        while let byte = value.last, byte == 32 || byte == 9 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
            throw .bad("A header field value contains a control character.")
        }
        let lowered = String(decoding: name.lazy.map(asciiLowercase), as: UTF8.self)
        return (lowered, String(decoding: value, as: UTF8.self))
    }

    static func framing(of request: HTTPRequest, limits: HTTPParserLimits) throws(HTTPParseError) -> BodyFraming {
        let headers = request.headers
        let hosts = headers.values("host")
        if hosts.count > 1 || (request.version == .http1_1 && hosts.isEmpty) {
            throw .bad(hosts.isEmpty ? "An HTTP/1.1 request needs a Host header." : "More than one Host header.")
        }
        let lengths = headers.values("content-length")
        let encodings = headers.values("transfer-encoding")
        if let expectation = headers["expect"], expectation.lowercased() != "100-continue" {
            throw HTTPParseError(.expectationFailed, "Only Expect: 100-continue is supported.")
        }
        if !encodings.isEmpty {
            guard lengths.isEmpty else { throw .bad("Content-Length and Transfer-Encoding together are not allowed.") }
            guard request.version == .http1_1 else { throw .bad("Transfer-Encoding is not allowed in HTTP/1.0.") }
            let codings = encodings.joined(separator: ",").split(separator: ",")
                .map { $0.trimmingWhitespace().lowercased() }
                .filter { !$0.isEmpty }
            if codings == ["chunked"] { return .chunked }
            if let unknown = codings.first(where: { $0 != "chunked" }) {
                throw HTTPParseError(.notImplemented, "The transfer coding \"\(unknown)\" is not supported.")
            }
            throw .bad("The chunked transfer coding may be applied only once.")
        }
        guard let length = lengths.first else { return .none }
        guard lengths.count == 1 else { throw .bad("More than one Content-Length header.") }
        guard !length.isEmpty, length.utf8.allSatisfy(isDigit) else {
            throw .bad("Content-Length must be digits only.")
        }
        guard length.utf8.count <= 9, let value = Int(length), value <= limits.maxBodySize else {
            throw HTTPParseError(.contentTooLarge, "The body is larger than \(limits.maxBodySize) bytes.")
        }
        return value == 0 ? .none : .length(value)
    }

    static func keepAlive(_ request: HTTPRequest) -> Bool {
        let options = request.headers.values("connection").joined(separator: ",").split(separator: ",")
            .map { $0.trimmingWhitespace().lowercased() }
        if options.contains("close") { return false }
        return request.version == .http1_1 || options.contains("keep-alive")
    }
}

/// tchar (RFC 9110 §5.6.2).
func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
        UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        true
    default: false
    }
}

func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

extension Substring {
    func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
