import HTTPServer

/// The HTTP parser's invariants on arbitrary bytes, for the fuzz target (`Sources/library-fuzz`)
/// and its regression tests.
///
/// Bad input may only ever throw an `HTTPParseError` whose status is a 4xx, 501 or 505. And the
/// parser must not care how the bytes arrive: input fed whole and input fed in two pieces (split
/// where the first byte says) must give the same requests and the same error.
package enum HTTPParserCheck {
    /// Runs the checks; traps (so the fuzzer reports the input) when one fails.
    package static func run(_ bytes: [UInt8]) {
        let whole = outcome(of: [bytes])
        if let split = bytes.first.map({ Int($0) % (bytes.count + 1) }) {
            let pieces = outcome(of: [Array(bytes[..<split]), Array(bytes[split...])])
            precondition(pieces == whole, "split at \(split) changes the outcome: \(pieces) vs \(whole)")
        }
        let bytewise = bytes.count <= 512 ? outcome(of: bytes.map { [$0] }) : whole
        precondition(bytewise == whole, "byte-at-a-time changes the outcome: \(bytewise) vs \(whole)")
    }

    /// What a connection would see: the requests parsed, then the error or the need for more.
    private static func outcome(of pieces: [[UInt8]]) -> [String] {
        var parser = HTTPRequestParser()
        var buffer: [UInt8] = []
        var index = 0
        var seen: [String] = []
        for piece in pieces {
            buffer += piece
            while true {
                do {
                    switch try parser.parse(buffer, at: &index) {
                    case .request(let request):
                        precondition(index <= buffer.count, "the parser read past its input")
                        seen.append(describe(request))
                        continue
                    case .expectsContinue: continue
                    case .needMore: break
                    }
                } catch {
                    let code = error.status.code
                    precondition((400...499).contains(code) || code == 501 || code == 505, "status \(code)")
                    return seen + ["error \(code)"]
                }
                break
            }
        }
        return seen
    }

    private static func describe(_ request: HTTPRequest) -> String {
        let headers = request.headers.fields.map { "\($0.name): \($0.value)" }.joined(separator: "|")
        return "\(request.method) \(request.target) \(request.version) \(headers) \(request.body) \(request.keepAlive)"
    }
}
