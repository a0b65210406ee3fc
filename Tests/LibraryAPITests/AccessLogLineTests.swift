import Testing

@testable import LibraryAPI

@Suite struct AccessLogLineTests {
    @Test(arguments: [0, 5, 10, 12, 99, 100, 105, 1_230, 1_234, 99_999, 123_456])
    func duration_IsPrintedAsTheDoubleWas(hundredths: Int) {
        var line: [UInt8] = []
        AccessLogLine.appendHundredths(hundredths, to: &line)
        #expect(String(decoding: line, as: UTF8.self) == "\(Double(hundredths) / 100)")
    }

    @Test func line_HasTheFieldsInOrder_AndQuotesWhatNeedsIt() {
        var line: [UInt8] = []
        AccessLogLine.append(
            method: "GET", route: "/books/{id}", status: 404, seconds: 0.000_123_4, requestID: #"a"b=c"#, to: &line)
        #expect(
            String(decoding: line, as: UTF8.self)
                == #"info request duration_ms=0.12 method=GET request_id="a\"b=c" route=/books/{id} status=404"#)
    }

    /// A signed token's `sub` is the client's text: quoted, with control characters escaped and cut
    /// at 128 bytes, so it can never start a log line of its own.
    @Test func subject_IsQuotedAndEscaped_NeverALineOfItsOwn() {
        var line: [UInt8] = []
        AccessLogLine.append(
            method: "GET", route: "/books", status: 200, seconds: 0, requestID: "r",
            subject: "eve\ninfo request status=200\t\u{7F}", to: &line)
        let text = String(decoding: line, as: UTF8.self)
        #expect(!text.contains("\n") && !text.contains("\t") && !text.contains("\u{7F}"))
        #expect(text.hasSuffix(#" sub="eve\ninfo request status=200\u0009\u007f""#), "\(text)")
        var long: [UInt8] = []
        AccessLogLine.append(
            method: "GET", route: "/", status: 200, seconds: 0, requestID: "r",
            subject: String(repeating: "a", count: 300),
            to: &long)
        #expect(String(decoding: long, as: UTF8.self).hasSuffix(" sub=" + String(repeating: "a", count: 128)))
    }
}
