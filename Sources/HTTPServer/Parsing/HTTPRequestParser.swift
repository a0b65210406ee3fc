/// An incremental HTTP/1.1 request parser (RFC 9112) over a byte buffer.
///
/// The connection appends what it reads to a buffer and calls `parse` with the offset of the first
/// unconsumed byte; the parser advances that offset over what it consumed. Bytes may arrive split
/// at any point. Parsing is strict: anything ambiguous about message framing is an error, because
/// ambiguity is what request smuggling exploits.
package struct HTTPRequestParser: Sendable {
    /// What one call to `parse` produced.
    package enum Event: Sendable {
        /// More bytes are needed.
        case needMore
        /// The head of an HTTP/1.1 request with `Expect: 100-continue` is complete and a body follows:
        /// the server may judge the head (`request`, without its body) before the client sends the
        /// body. Nothing of the body has been consumed yet.
        case expectsContinue(HTTPRequest)
        /// A complete request.
        case request(HTTPRequest)
    }

    private enum State: Sendable {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
    }

    package let limits: HTTPParserLimits
    private var state = State.head
    /// Head bytes already scanned for line ends, relative to the start of the head.
    private var scanned = 0
    private var requestLineEnd: Int?
    private var lineStart = 0
    private var trailerBytes = 0
    private var pending: HTTPRequest?

    package init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
    }

    /// Whether the parser is between requests (nothing of a next request consumed yet).
    package var isIdle: Bool {
        if case .head = state { return scanned == 0 }
        return false
    }

    /// Parses from `buffer[index...]`, advancing `index` past consumed bytes.
    package mutating func parse(_ buffer: [UInt8], at index: inout Int) throws(HTTPParseError) -> Event {
        while true {
            switch state {
            case .head:
                guard let head = try scanHead(buffer, at: &index) else { return .needMore }
                let (request, framing) = try HTTPHeadParser.parse(head, limits: limits)
                pending = request
                switch framing {
                case .none:
                    return .request(finish())
                case .length(let length):
                    state = .body(remaining: length)
                case .chunked:
                    state = .chunkSize
                }
                // RFC 9110 §10.1.1: an HTTP/1.0 request's expectation is ignored.
                if request.version == .http1_1, request.headers.contains("expect") {
                    return .expectsContinue(request)
                }
            case .body(let remaining):
                let buffered = min(remaining, buffer.count - index)
                pending!.body.append(contentsOf: buffer[index..<index + buffered])
                index += buffered
                guard buffered == remaining else {
                    state = .body(remaining: remaining - buffered)
                    return .needMore
                }
                return .request(finish())
            case .chunkSize:
                guard let line = try nextLine(buffer, at: &index, limit: 1024, what: "chunk size line") else {
                    return .needMore
                }
                let size = try Self.chunkSize(line)
                guard size <= limits.maxBodySize - pending!.body.count else {
                    throw HTTPParseError(.contentTooLarge, "The body is larger than \(limits.maxBodySize) bytes.")
                }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let buffered = min(remaining, buffer.count - index)
                pending!.body.append(contentsOf: buffer[index..<index + buffered])
                index += buffered
                guard buffered == remaining else {
                    state = .chunkData(remaining: remaining - buffered)
                    return .needMore
                }
                state = .chunkDataEnd
            case .chunkDataEnd:
                guard buffer.count - index >= 2 else { return .needMore }
                guard buffer[index] == 13, buffer[index + 1] == 10 else {
                    throw .bad("A chunk's data is not followed by CRLF.")
                }
                index += 2
                state = .chunkSize
            case .trailers:
                let before = index
                guard let line = try nextLine(buffer, at: &index, limit: limits.maxHeadSize, what: "trailer") else {
                    return .needMore
                }
                trailerBytes += index - before
                guard trailerBytes <= limits.maxHeadSize else {
                    throw HTTPParseError(.requestHeaderFieldsTooLarge, "The trailer section is too large.")
                }
                if line.isEmpty { return .request(finish()) }
                // Trailers are validated like header fields, then dropped: nothing here uses them.
                _ = try HTTPHeadParser.field(line)
            }
        }
    }

    private mutating func finish() -> HTTPRequest {
        let request = pending!
        pending = nil
        state = .head
        scanned = 0
        requestLineEnd = nil
        lineStart = 0
        trailerBytes = 0
        return request
    }

    /// Finds the end of the head (an empty line), checking line endings on the way. Returns the
    /// head's bytes without the final empty line, and moves `index` past it.
    private mutating func scanHead(_ buffer: [UInt8], at index: inout Int) throws(HTTPParseError) -> ArraySlice<UInt8>?
    {
        if scanned == 0 {
            // RFC 9112 §2.2: ignore empty lines before a request line.
            while buffer.count - index >= 2, buffer[index] == 13, buffer[index + 1] == 10 { index += 2 }
            if buffer.count - index == 1, buffer[index] == 13 { return nil }
        }
        let start = index
        var position = start + scanned
        let end = buffer.count
        // Past the largest head allowed no byte needs a look: one more says it is too large.
        let limit = min(end, start + limits.maxHeadSize + 1)
        while position < end {
            position = buffer.firstControlCharacter(from: position, before: limit)
            guard position < end else { break }
            let byte = buffer[position]
            if byte == 13 {
                guard position + 1 < end else { break }
                guard buffer[position + 1] == 10 else { throw .bad("A bare CR is not allowed in the request head.") }
                let lineLength = position - (start + lineStart)
                if requestLineEnd == nil {
                    requestLineEnd = position - start
                    if lineLength > limits.maxRequestLineSize {
                        throw HTTPParseError(
                            .uriTooLong, "The request line is longer than \(limits.maxRequestLineSize) bytes.")
                    }
                } else if lineLength == 0 {
                    index = position + 2
                    return buffer[start..<(position - 2)]
                }
                position += 2
                lineStart = position - start
                continue
            }
            if byte == 10 { throw .bad("A bare LF is not allowed in the request head; lines end with CRLF.") }
            position += 1
            if position - start > limits.maxHeadSize { break }
        }
        scanned = position - start
        if scanned > limits.maxHeadSize || (requestLineEnd == nil && scanned > limits.maxRequestLineSize) {
            if requestLineEnd == nil {
                throw HTTPParseError(.uriTooLong, "The request line is longer than \(limits.maxRequestLineSize) bytes.")
            }
            throw HTTPParseError(
                .requestHeaderFieldsTooLarge, "The request head is larger than \(limits.maxHeadSize) bytes.")
        }
        return nil
    }

    /// The next CRLF-terminated line (without CRLF) of a chunked body, or nil until it is complete.
    private func nextLine(
        _ buffer: [UInt8],
        at index: inout Int,
        limit: Int,
        what: String
    ) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        var position = index
        while position < buffer.count {
            switch buffer[position] {
            case 13:
                guard position + 1 < buffer.count else { return nil }
                guard buffer[position + 1] == 10 else { throw .bad("A bare CR is not allowed in a \(what).") }
                let line = buffer[index..<position]
                index = position + 2
                return line
            case 10:
                throw .bad("A bare LF is not allowed in a \(what).")
            default:
                position += 1
                if position - index > limit { throw .bad("The \(what) is too long.") }
            }
        }
        return nil
    }

    /// Parses `chunk-size [chunk-ext]`.
    static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        var size = 0
        var digits = 0
        var position = line.startIndex
        while position < line.endIndex, let value = hexValue(line[position]) {
            digits += 1
            guard digits <= 8 else { throw HTTPParseError(.contentTooLarge, "A chunk size is too large.") }
            size = size << 4 | value
            position += 1
        }
        guard digits > 0 else { throw .bad("A chunk size is not a hexadecimal number.") }
        // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): accepted, not interpreted.
        let rest = line[position...]
        if let first = rest.first(where: { $0 != 32 && $0 != 9 }) {
            guard first == UInt8(ascii: ";") else {
                throw .bad("A chunk size is followed by something other than an extension.")
            }
            guard rest.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
                throw .bad("A chunk extension contains a control character.")
            }
        }
        return size
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }
}
