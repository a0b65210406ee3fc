/// Writes JSON text straight into a byte buffer; faster than a generic encoder, and enough for the
/// few shapes this API sends.
package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = [false]

    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// A writer whose text follows `prefix` in the same bytes (an event's head, before its data).
    package init(after prefix: [UInt8], capacity: Int = 256) {
        bytes = prefix
        bytes.reserveCapacity(prefix.count + capacity)
    }

    /// The bytes written, then `suffix`.
    package consuming func finish(with suffix: [UInt8]) -> [UInt8] {
        bytes += suffix
        return bytes
    }

    package mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }

    package mutating func endObject() {
        needsComma.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    package mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma.append(false)
    }

    package mutating func endArray() {
        needsComma.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes `"name":`; the value written next belongs to it.
    package mutating func key(_ name: String) {
        separate()
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        needsComma[needsComma.count - 1] = false
    }

    /// Writes a key already written out as `"name":` (`JSONKeys`).
    package mutating func key(bytes: [UInt8]) {
        separate()
        self.bytes.append(contentsOf: bytes)
        needsComma[needsComma.count - 1] = false
    }

    package mutating func string(_ value: String) {
        separate()
        Self.appendString(value, to: &bytes)
    }

    package mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    package mutating func int(_ value: Int) {
        separate()
        Self.appendInt(value, to: &bytes)
    }

    package mutating func int(_ value: Int?) {
        if let value { int(value) } else { null() }
    }

    package mutating func bool(_ value: Bool) {
        separate()
        Self.appendBool(value, to: &bytes)
    }

    package mutating func null() {
        separate()
        Self.appendNull(to: &bytes)
    }

    /// Writes a whole parsed value (a number as it was written).
    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let text):
            separate()
            bytes.append(contentsOf: text.utf8)
        case .string(let text): string(text)
        case .array(let items):
            beginArray()
            for item in items { self.value(item) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members {
                key(name)
                self.value(member)
            }
            endObject()
        }
    }

    package static func appendBool(_ value: Bool, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: value ? Self.true : Self.false)
    }

    package static func appendNull(to bytes: inout [UInt8]) {
        bytes.append(contentsOf: Self.null)
    }

    private static let `true` = Array("true".utf8)
    private static let `false` = Array("false".utf8)
    private static let null = Array("null".utf8)

    /// Writes one value of JSON text that `write` appends to the bytes itself: for a large value
    /// of a known shape (a snapshot's thousands of members) written without a call per token.
    package mutating func raw(_ write: (inout [UInt8]) -> Void) {
        separate()
        write(&bytes)
    }

    private mutating func separate() {
        if needsComma[needsComma.count - 1] {
            bytes.append(UInt8(ascii: ","))
        } else {
            needsComma[needsComma.count - 1] = true
        }
    }

    /// Appends `value` as a JSON string literal, escaping quotes, backslashes and control characters.
    /// Runs of bytes that need no escape (nearly all of them) are copied whole, found eight bytes
    /// at a time.
    package static func appendString(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                // Eight bytes at once while none of them needs an escape (nearly always).
                if index + 8 <= utf8.count {
                    let word = UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self)
                    if !Self.needsEscape(word) {
                        index += 8
                        continue
                    }
                }
                let byte = utf8[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                    appendEscape(byte, to: &bytes)
                    runStart = index + 1
                }
                index += 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Whether any byte of `word` is a control character, a quote or a backslash (bytes of 0x80
    /// and up, UTF-8's multi-byte sequences, need none): the usual test for a zero byte, applied
    /// to the bytes less than 0x20 and to the bytes equal to each of the two.
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
        let below = (word &- ones &* 0x20) & ~word & highs  // a byte < 0x20
        let quote = hasZero(word ^ (ones &* UInt64(UInt8(ascii: "\""))))
        let backslash = hasZero(word ^ (ones &* UInt64(UInt8(ascii: "\\"))))
        return below | quote | backslash != 0
    }

    /// Appends `value` in decimal, without making a string of it.
    package static func appendInt(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    private static func appendEscape(_ byte: UInt8, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(UInt8(ascii: "u"))
            bytes.append(0x30)
            bytes.append(0x30)
            bytes.append(hex.utf8Start[Int(byte >> 4)])
            bytes.append(hex.utf8Start[Int(byte & 0xF)])
        }
    }
}
