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
}
