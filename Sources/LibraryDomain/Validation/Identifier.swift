import Synchronization

/// Resource ids: lowercase UUID text (8-4-4-4-12 hexadecimal digits).
///
/// Written by hand rather than with Foundation's `UUID`, which reads `/dev/urandom` through a new
/// file descriptor for every id it makes and parses with `sscanf`: both showed in the request
/// profile, since every request gets an id and every route with an id parses one.
package enum Identifier {
    /// A new random id (a version 4 UUID), from the system's random source.
    package static func make() -> String {
        var random = SystemRandomNumberGenerator()
        return format(high: random.next(), low: random.next(), version: 4)
    }

    /// A new id that is unique in this process and unlikely to repeat across processes, for request
    /// ids: a random per-process half and a counter (a version 8 UUID, RFC 9562), so making one
    /// costs no system call.
    package static func sequential() -> String {
        format(high: processPrefix, low: UInt64(counter.wrappingAdd(1, ordering: .relaxed).newValue), version: 8)
    }

    private static let processPrefix: UInt64 = {
        var random = SystemRandomNumberGenerator()
        return random.next()
    }()
    private static let counter = Atomic<Int>(0)

    /// The canonical (lowercase) form of `text` if it is a UUID, else nil.
    ///
    /// Checked in place; an id already in canonical form (the usual case) costs one copy, the
    /// returned string.
    package static func canonical(_ text: some StringProtocol) -> String? {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return nil }
        var isLowercase = true
        var position = utf8.startIndex
        for index in 0..<36 {
            let byte = utf8[position]
            position = utf8.index(after: position)
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
            } else {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): break
                case UInt8(ascii: "A")...UInt8(ascii: "F"): isLowercase = false
                default: return nil
                }
            }
        }
        guard !isLowercase else { return String(text) }
        return String(decoding: utf8.map { (0x41...0x46).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// Whether `text` is a UUID.
    package static func isValid(_ text: String) -> Bool { canonical(text) != nil }

    /// 128 bits as UUID text, with the version and RFC 9562 variant bits set.
    private static func format(high: UInt64, low: UInt64, version: UInt64) -> String {
        let high = high & ~(0xF << 12) | version << 12
        let low = low & ~(0b11 << 62) | 0b10 << 62
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for nibble in 0..<32 {
                if position == 8 || position == 13 || position == 18 || position == 23 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                buffer[position] = digits.utf8Start[Int(word >> UInt64(60 - 4 * (nibble % 16)) & 0xF)]
                position += 1
            }
            return 36
        }
    }
}
