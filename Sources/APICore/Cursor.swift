import Digest
import LibraryDomain

/// The opaque `cursor` of list pages: where the next page starts.
///
/// - In insertion order, `c` and the position (`seq`) after which the next page starts, in base 36.
///   Insertion order never changes, so pages stay stable under concurrent inserts. Every string of
///   that shape (`^c[0-9a-z]{1,12}$`) names a position, so a well-formed one is never refused.
///   Twelve base-36 digits stay below `Int.max`.
/// - In a sorted list, `s` and, in base64url, the order (`title`, `-title`), the id and the sort
///   key of the last row of the page, one per line: the next page is the rows after that one in
///   that order (keyset paging), however many rows were written before it meanwhile.
///
/// Anything else, or a cursor of another order than the request's, is a 400.
package enum Cursor {
    package static func encode(_ seq: Int) -> String {
        "c" + String(seq, radix: 36)
    }

    /// The cursor after `position` in `order`.
    package static func encode<Field>(_ position: SortPosition, in order: ListOrder<Field>) -> String {
        let key =
            switch position.key {
            case .string(let text): text
            case .int(let number): String(number)
            case .bool, .null: preconditionFailure("not a sort key: \(position.key)")
            }
        return "s" + Base64URL.encode(Array("\(order.text)\n\(position.id)\n\(key)".utf8))
    }

    /// The position a cursor of insertion order names; a 400 when it does not have the shape
    /// `encode` gives.
    package static func decode(_ text: String) throws(APIError) -> Int {
        let digits = text.utf8.dropFirst()
        guard text.utf8.first == UInt8(ascii: "c"), (1...12).contains(digits.count),
            digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }),
            let seq = Int(String(text.dropFirst()), radix: 36)
        else {
            if text.utf8.first == UInt8(ascii: "s") {
                throw .badRequest("cursor is of a sorted list; give the sort it was returned with.")
            }
            throw .badRequest("cursor is not a cursor this server returned.")
        }
        return seq
    }

    /// Where a page of `order` starts: after the position a sorted cursor names; a 400 for a
    /// cursor that is not one `encode` gave for this order.
    package static func decode<Field>(_ text: String, in order: ListOrder<Field>) throws(APIError) -> SortPosition {
        guard text.utf8.first == UInt8(ascii: "s"), let bytes = Base64URL.decode(text.utf8.dropFirst()),
            let payload = String(validating: bytes, as: UTF8.self)
        else {
            if text.utf8.first == UInt8(ascii: "c") {
                throw .badRequest("cursor is of a list in insertion order; this one has sort=\(order.text).")
            }
            throw .badRequest("cursor is not a cursor this server returned.")
        }
        let parts = payload.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let id = Identifier.canonical(String(parts[1])), id == parts[1] else {
            throw .badRequest("cursor is not a cursor this server returned.")
        }
        guard parts[0] == order.text else {
            throw .badRequest("cursor is of a list with sort=\(parts[0]); this one has sort=\(order.text).")
        }
        let key: FieldValue
        switch order.field.descriptor.kind {
        case .integer:
            guard let number = Int(parts[2]) else { throw .badRequest("cursor is not a cursor this server returned.") }
            key = .int(number)
        case .text, .timestamp, .identifier:
            guard !parts[2].utf8.contains(0) else { throw .badRequest("cursor is not a cursor this server returned.") }
            key = SortKey.of(.string(String(parts[2])), order.field.descriptor)
        case .boolean: preconditionFailure("booleans are not sortable")
        }
        return SortPosition(key: key, id: id)
    }
}
