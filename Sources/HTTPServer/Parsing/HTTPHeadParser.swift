/// How the body of a request is delimited.
enum BodyFraming: Equatable {
    case none
    case length(Int)
    case chunked
}

/// Parses a complete request head (request line and header fields, CRLF-separated, without the
/// final empty line) and decides the body framing, rejecting every ambiguous shape.
///
/// The common case allocates twice: the head's storage (`HTTPRequestHeaders`) and the target.
/// Fields are found, checked and compared as bytes in place; framing never builds a string.
enum HTTPHeadParser {
    static func parse(_ head: ArraySlice<UInt8>, limits: HTTPParserLimits) throws(HTTPParseError) -> (
        HTTPRequest, BodyFraming
    ) {
        // `scanHead` checked that every CR is followed by LF, so the lines are what lies between CRLFs.
        let fieldCount = head.occurrences(of: 13)
        let requestLineEnd = head.index(of: 13) ?? head.endIndex
        let (method, target, version, authority) = try Self.requestLine(head[..<requestLineEnd])
        guard fieldCount <= limits.maxHeaderCount else {
            throw HTTPParseError(.requestHeaderFieldsTooLarge, "More than \(limits.maxHeaderCount) header fields.")
        }
        var headers = HTTPRequestHeaders(head: head, capacity: fieldCount)
        var lineEnd = requestLineEnd
        while lineEnd < head.endIndex {
            var lineStart = lineEnd + 1
            if lineStart < head.endIndex, head[lineStart] == 10 { lineStart += 1 }
            lineEnd = head[lineStart...].index(of: 13) ?? head.endIndex
            let (name, value) = try field(head[lineStart..<lineEnd])
            let origin = head.startIndex
            headers.append(
                name: (name.lowerBound - origin)..<(name.upperBound - origin),
                value: (value.lowerBound - origin)..<(value.upperBound - origin))
        }
        var request = HTTPRequest(method: method, target: target, version: version, headers: headers)
        request.authority = authority
        let framing = try Self.framing(of: request, limits: limits)
        request.keepAlive = Self.keepAlive(request)
        return (request, framing)
    }

    /// `method SP request-target SP HTTP-version`, each part checked; an absolute-form target is
    /// reduced to its path and query, and its authority returned apart.
    static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (
        String, String, HTTPVersion, authority: String?
    ) {
        guard let firstSpace = line.index(of: 32),
            let secondSpace = line[(firstSpace + 1)...].index(of: 32)
        else {
            throw .bad("The request line must be: method, target and version, one space apart.")
        }
        let method = line[..<firstSpace]
        let target = line[(firstSpace + 1)..<secondSpace]
        let version = line[(secondSpace + 1)...]
        guard !method.isEmpty, method.all(isTokenByte) else { throw .bad("The method is not a valid token.") }
        guard !target.isEmpty, target.all({ $0 > 32 && $0 < 127 }) else {
            throw .bad("The request target is empty or has a space, control or non-ASCII byte.")
        }
        let v = version.startIndex
        guard version.count == 8, version.hasPrefix("HTTP/"),
            isDigit(version[v + 5]), version[v + 6] == UInt8(ascii: "."), isDigit(version[v + 7])
        else { throw .bad("The HTTP version is malformed.") }
        let parsedVersion: HTTPVersion
        switch (version[v + 5], version[v + 7]) {
        case (UInt8(ascii: "1"), UInt8(ascii: "1")): parsedVersion = .http1_1
        case (UInt8(ascii: "1"), UInt8(ascii: "0")): parsedVersion = .http1_0
        default:
            throw HTTPParseError(.httpVersionNotSupported, "Only HTTP/1.1 and HTTP/1.0 are supported.")
        }
        let origin: ArraySlice<UInt8>
        let schemeLength = target.hasPrefix("https://") ? 8 : target.hasPrefix("http://") ? 7 : 0
        let methodName = String(decoding: method, as: UTF8.self)
        if schemeLength > 0 {
            // absolute-form (RFC 9112 §3.2.2): keep the path and query; the authority replaces Host.
            let afterScheme = target.dropFirst(schemeLength)
            let pathStart =
                afterScheme.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") })
                ?? afterScheme.endIndex
            let authority = afterScheme[..<pathStart]
            // An http(s) URI names a host, and never carries userinfo (RFC 9110 §4.2.4).
            guard !authority.isEmpty, authority.index(of: UInt8(ascii: "@")) == nil else {
                throw .bad("An absolute-form target must name a host, without userinfo.")
            }
            let authorityText = String(decoding: authority, as: UTF8.self)
            guard pathStart < afterScheme.endIndex else { return (methodName, "/", parsedVersion, authorityText) }
            if afterScheme[pathStart] == UInt8(ascii: "?") {
                return (
                    methodName, "/" + String(decoding: afterScheme[pathStart...], as: UTF8.self), parsedVersion,
                    authorityText
                )
            }
            return (
                methodName, String(decoding: afterScheme[pathStart...], as: UTF8.self), parsedVersion, authorityText
            )
        } else if target.equals("*") {
            guard method.equals("OPTIONS") else { throw .bad("The target * is only for OPTIONS.") }
            origin = target
        } else if target[target.startIndex] != UInt8(ascii: "/") {
            throw .bad("The request target must start with /.")
        } else {
            origin = target
        }
        return (methodName, String(decoding: origin, as: UTF8.self), parsedVersion, nil)
    }

    /// `field-name ":" OWS field-value OWS`: where the name and the value (without its surrounding
    /// whitespace) lie in `line`.
    static func field(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (name: Range<Int>, value: Range<Int>) {
        guard line.startIndex < line.endIndex, line[line.startIndex] != 32, line[line.startIndex] != 9 else {
            throw .bad("Obsolete line folding (a header line starting with whitespace) is not allowed.")
        }
        guard let colon = line.index(of: UInt8(ascii: ":")) else { throw .bad("A header line has no colon.") }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty else { throw .bad("A header field has an empty name.") }
        guard name.all(isTokenByte) else {
            if name.last == 32 || name.last == 9 {
                throw .bad("Whitespace between a header name and the colon is not allowed.")
            }
            throw .bad("A header field name is not a valid token.")
        }
        let value = trimmingWhitespace(line[(colon + 1)...])
        guard value.isFieldValue() else {
            throw .bad("A header field value contains a control character.")
        }
        return (name.indices, value.indices)
    }

    /// Decides the body framing from the fields that bear on it, read in one pass without copies.
    static func framing(of request: HTTPRequest, limits: HTTPParserLimits) throws(HTTPParseError) -> BodyFraming {
        let headers = request.headers
        var hosts = 0
        var lengths = 0
        var length: ArraySlice<UInt8> = []
        var encodings = 0
        var expectation: ArraySlice<UInt8>?
        var index = 0
        while index < headers.count {
            defer { index += 1 }
            let name = headers.name(at: index)
            if name.equals("host") {
                hosts += 1
            } else if name.equals("content-length") {
                if lengths == 0 { length = headers.value(at: index) }
                lengths += 1
            } else if name.equals("transfer-encoding") {
                encodings += 1
            } else if name.equals("expect"), expectation == nil {
                expectation = headers.value(at: index)
            }
        }
        if hosts > 1 || (request.version == .http1_1 && hosts == 0) {
            throw .bad(hosts == 0 ? "An HTTP/1.1 request needs a Host header." : "More than one Host header.")
        }
        if let expectation, !expectation.equalsIgnoringCase("100-continue") {
            throw HTTPParseError(.expectationFailed, "Only Expect: 100-continue is supported.")
        }
        if encodings > 0 {
            guard lengths == 0 else { throw .bad("Content-Length and Transfer-Encoding together are not allowed.") }
            guard request.version == .http1_1 else { throw .bad("Transfer-Encoding is not allowed in HTTP/1.0.") }
            var codings = 0
            var unknown: ArraySlice<UInt8>?
            forEachListElement(of: "transfer-encoding", in: headers) { coding in
                codings += 1
                if unknown == nil, !coding.equalsIgnoringCase("chunked") { unknown = coding }
            }
            if let unknown {
                let text = String(decoding: unknown, as: UTF8.self).lowercased()
                throw HTTPParseError(.notImplemented, "The transfer coding \"\(text)\" is not supported.")
            }
            if codings == 1 { return .chunked }
            throw .bad("The chunked transfer coding may be applied only once.")
        }
        guard lengths > 0 else { return .none }
        guard lengths == 1 else { throw .bad("More than one Content-Length header.") }
        guard !length.isEmpty, length.all(isDigit) else {
            throw .bad("Content-Length must be digits only.")
        }
        guard length.count <= 9, case let value = Self.decimal(length), value <= limits.maxBodySize else {
            throw HTTPParseError(.contentTooLarge, "The body is larger than \(limits.maxBodySize) bytes.")
        }
        return value == 0 ? .none : .length(value)
    }

    static func keepAlive(_ request: HTTPRequest) -> Bool {
        var close = false
        var keepAlive = false
        forEachListElement(of: "connection", in: request.headers) { option in
            if option.equalsIgnoringCase("close") { close = true }
            if option.equalsIgnoringCase("keep-alive") { keepAlive = true }
        }
        if close { return false }
        return request.version == .http1_1 || keepAlive
    }

    /// Calls `body` with each non-empty element, trimmed, of the comma-separated lists in the
    /// values of every `name` field, in order (RFC 9110 §5.6.1).
    private static func forEachListElement(
        of name: String, in headers: HTTPRequestHeaders, _ body: (ArraySlice<UInt8>) -> Void
    ) {
        var index = 0
        while index < headers.count {
            defer { index += 1 }
            guard headers.hasName(index, name) else { continue }
            var rest = headers.value(at: index)
            while !rest.isEmpty {
                let comma = rest.index(of: UInt8(ascii: ",")) ?? rest.endIndex
                let element = trimmingWhitespace(rest[..<comma])
                if !element.isEmpty { body(element) }
                rest = rest[comma...].dropFirst()
            }
        }
    }

    /// The value of at most nine decimal digits.
    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int {
        var value = 0
        var index = digits.startIndex
        while index < digits.endIndex {
            value = value * 10 + Int(digits[index] - 0x30)
            index += 1
        }
        return value
    }

    /// `bytes` without leading and trailing spaces and tabs.
    private static func trimmingWhitespace(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes[start] == 32 || bytes[start] == 9 { start += 1 }
        while end > start, bytes[end - 1] == 32 || bytes[end - 1] == 9 { end -= 1 }
        return bytes[start..<end]
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
