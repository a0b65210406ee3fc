/// Base64url without padding (RFC 7515 §2, RFC 4648 §5), as JWS and JWK use it: strict, so a
/// token or key has one spelling. Padding, characters outside the alphabet, a length that no
/// encoding has (4n + 1) and set bits past the data in the last character are refused.
package enum Base64URL {
    package static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text {
            guard let value = sextet(byte) else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // What is left is the last character's unused low bits: an encoder writes zeros there.
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }

    package static func decode(_ text: String) -> [UInt8]? { decode(Array(text.utf8)) }

    package static func encode(_ bytes: some Collection<UInt8>) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(alphabet[Int((buffer >> UInt32(bits)) & 63)])
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(6 - bits)) & 63)]) }
        return String(decoding: out, as: UTF8.self)
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
