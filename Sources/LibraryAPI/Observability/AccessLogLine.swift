/// The access-log line of one request, appended as bytes: `info request duration_ms=0.12
/// method=GET request_id=… route=/books/{id} status=200`, the fields and quoting the swift-log
/// handler gives every other line (keys in order; a value with a space, `"`, `=` or a control
/// character is quoted, control characters escaped, so no value can start a line of its own).
/// A request with a signed token adds `sub=`, the principal; a token itself is never logged.
enum AccessLogLine {
    static func append(
        method: String, route: String, status: Int, seconds: Double, requestID: String, subject: String? = nil,
        to line: inout [UInt8]
    ) {
        line.append(contentsOf: "info request duration_ms=".utf8)
        appendHundredths(Int(seconds * 100_000), to: &line)
        line.append(contentsOf: " method=".utf8)
        appendValue(method, to: &line)
        line.append(contentsOf: " request_id=".utf8)
        appendValue(requestID, to: &line)
        line.append(contentsOf: " route=".utf8)
        appendValue(route, to: &line)
        line.append(contentsOf: " status=".utf8)
        appendInteger(status, to: &line)
        if let subject {
            line.append(contentsOf: " sub=".utf8)
            appendValue(String(subject.prefix(128)), to: &line)
        }
    }

    /// `12.34`, `0.5`, `3.0`: a count of hundredths as `Double.description` prints it.
    static func appendHundredths(_ hundredths: Int, to line: inout [UInt8]) {
        appendInteger(hundredths / 100, to: &line)
        line.append(UInt8(ascii: "."))
        let fraction = hundredths % 100
        if fraction % 10 == 0 {
            line.append(UInt8(ascii: "0") + UInt8(fraction / 10))
        } else {
            line.append(UInt8(ascii: "0") + UInt8(fraction / 10))
            line.append(UInt8(ascii: "0") + UInt8(fraction % 10))
        }
    }

    static func appendInteger(_ value: Int, to line: inout [UInt8]) {
        guard value > 0 else {
            if value == 0 { line.append(UInt8(ascii: "0")) } else { line.append(contentsOf: String(value).utf8) }
            return
        }
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        while divisor > 0 {
            line.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }

    static func appendValue(_ text: String, to line: inout [UInt8]) {
        let utf8 = text.utf8
        let quoted = utf8.isEmpty || utf8.contains { $0 <= 32 || $0 == 34 || $0 == 61 || $0 == 127 }
        guard quoted else { return line.append(contentsOf: utf8) }
        line.append(34)
        for byte in utf8 {
            switch byte {
            case 34, 92:
                line.append(92)
                line.append(byte)
            case 10:
                line.append(contentsOf: "\\n".utf8)
            case 0..<32, 127:
                let digits = Array("0123456789abcdef".utf8)
                line.append(contentsOf: "\\u00".utf8)
                line.append(digits[Int(byte >> 4)])
                line.append(digits[Int(byte & 15)])
            default:
                line.append(byte)
            }
        }
        line.append(34)
    }
}
