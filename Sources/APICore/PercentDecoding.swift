/// Decodes `%XX` escapes (and, in queries, `+` as space); nil for a bad escape or invalid UTF-8.
package func percentDecode(_ text: Substring, plusAsSpace: Bool = false) -> String? {
    if !text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusAsSpace && $0 == UInt8(ascii: "+")) }) {
        return String(text)  // nothing to decode (the usual case), and already valid UTF-8
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    var iterator = text.utf8.makeIterator()
    while let byte = iterator.next() {
        switch byte {
        case UInt8(ascii: "%"):
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        case UInt8(ascii: "+") where plusAsSpace:
            bytes.append(UInt8(ascii: " "))
        default:
            bytes.append(byte)
        }
    }
    return String(validating: bytes, as: UTF8.self)
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: byte - 0x30
    case 0x41...0x46: byte - 0x41 + 10
    case 0x61...0x66: byte - 0x61 + 10
    default: nil
    }
}
