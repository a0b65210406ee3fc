/// The opaque `cursor` of list pages: `c` and the position after which the next page starts, in
/// base 36. Insertion order never changes, so pages stay stable under concurrent inserts.
///
/// Every string of the documented shape (`^c[0-9a-z]{1,12}$`) names a position, so a well-formed
/// cursor is never refused; anything else is a 400. Twelve base-36 digits stay below `Int.max`.
package enum Cursor {
    package static func encode(_ seq: Int) -> String {
        "c" + String(seq, radix: 36)
    }

    /// The position a cursor names; a 400 when it does not have the shape `encode` gives.
    package static func decode(_ text: String) throws(APIError) -> Int {
        let digits = text.utf8.dropFirst()
        guard text.utf8.first == UInt8(ascii: "c"), (1...12).contains(digits.count),
            digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }),
            let seq = Int(String(text.dropFirst()), radix: 36)
        else { throw .badRequest("cursor is not a cursor this server returned.") }
        return seq
    }
}
