import LibraryDomain
import SQLite

/// What a batch's `NOTIFY` carries to the other replicas: the id of its last change and, when they
/// fit in a notification, the batch's log rows themselves, so that a replica applies another's
/// commit without reading the log. Notifications come in commit order (PostgreSQL holds a lock
/// from a notifying transaction's commit to its end, for that), and a batch's changes are
/// consecutive, so rows that follow what a replica applied are exactly the log's next changes.
///
/// The text is the last id, a space and the sending replica's token (so that a replica knows its
/// own commits, which its writer hands over), then, after one more space, the rows as a JSON array
/// of arrays (values `null`, integers and strings; one array per row, in `ChangeLog.columns`
/// order). Rows that would not fit in `limit` bytes are left out: a replica that hears no rows
/// reads the log.
enum FeedPayload {
    /// PostgreSQL refuses payloads of 8,000 bytes or more.
    static let limit = 7_900

    static func encode(last: Int, origin: String, rows: [[SQLiteValue]], limit: Int = limit) -> String {
        let head = "\(last) \(origin)"
        var out: [UInt8] = Array(head.utf8)
        guard !rows.isEmpty else { return head }
        out.reserveCapacity(min(limit, 256 * rows.count))
        out += " [".utf8
        for (index, row) in rows.enumerated() {
            out += index == 0 ? "[".utf8 : ",[".utf8
            for (column, value) in row.enumerated() {
                if column > 0 { out.append(UInt8(ascii: ",")) }
                switch value {
                case .null: out += "null".utf8
                case .integer(let number): out += String(number).utf8
                case .real: return head  // no column of the log holds one
                case .text(let text):
                    out.append(UInt8(ascii: "\""))
                    for byte in text.utf8 {
                        switch byte {
                        case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                            out += [UInt8(ascii: "\\"), byte]
                        case 0..<0x20:
                            out += "\\u00".utf8
                            out += [hex(byte >> 4), hex(byte & 0xF)]
                        default: out.append(byte)
                        }
                    }
                    out.append(UInt8(ascii: "\""))
                }
            }
            out.append(UInt8(ascii: "]"))
            if out.count >= limit { return head }
        }
        out.append(UInt8(ascii: "]"))
        return out.count < limit ? String(decoding: out, as: UTF8.self) : head
    }

    /// The last id a payload names; nil when it is not one of ours.
    static func last(_ payload: String) -> Int? {
        Int(payload.prefix { $0 != " " })
    }

    /// The token of the replica that sent a payload.
    static func origin(_ payload: String) -> Substring {
        payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).dropFirst().first ?? ""
    }

    /// The changes a payload carries; nil when it carries none, or cannot be read.
    static func changes(_ payload: String) -> [CommittedChange]? {
        var parser = Parser(bytes: Array(payload.utf8))
        guard parser.skipNumber(), parser.take(UInt8(ascii: " ")), parser.skipToken(), parser.take(UInt8(ascii: " ")),
            let rows = parser.rows(),
            parser.position == parser.bytes.count,
            rows.allSatisfy({ $0.count == ChangeLog.kinds.count }), !rows.isEmpty
        else { return nil }
        return ChangeLog.changes(rows.map { ChangeLog.item(SQLRow(values: $0)) })
    }

    private static func hex(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// Reads what `encode` writes, and nothing else.
    private struct Parser {
        let bytes: [UInt8]
        var position = 0

        mutating func take(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func skipNumber() -> Bool { number() != nil }

        mutating func skipToken() -> Bool {
            let start = position
            while position < bytes.count, bytes[position] != UInt8(ascii: " ") { position += 1 }
            return position > start
        }

        mutating func number() -> Int64? {
            let start = position
            if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                position += 1
            }
            return Int64(String(decoding: bytes[start..<position], as: UTF8.self))
        }

        mutating func rows() -> [[SQLiteValue]]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var rows: [[SQLiteValue]] = []
            repeat {
                guard take(UInt8(ascii: "[")) else { return nil }
                var row: [SQLiteValue] = []
                row.reserveCapacity(ChangeLog.kinds.count)
                repeat {
                    guard let value = value() else { return nil }
                    row.append(value)
                } while take(UInt8(ascii: ","))
                guard take(UInt8(ascii: "]")) else { return nil }
                rows.append(row)
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) ? rows : nil
        }

        mutating func value() -> SQLiteValue? {
            guard position < bytes.count else { return nil }
            switch bytes[position] {
            case UInt8(ascii: "n"):
                guard bytes[position...].starts(with: "null".utf8) else { return nil }
                position += 4
                return .null
            case UInt8(ascii: "\""):
                return string().map(SQLiteValue.text)
            default:
                return number().map(SQLiteValue.integer)
            }
        }

        mutating func string() -> String? {
            position += 1
            var out: [UInt8] = []
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard position < bytes.count else { return nil }
                    let escaped = bytes[position]
                    position += 1
                    if escaped == UInt8(ascii: "u") {
                        guard position + 4 <= bytes.count,
                            let code = UInt8(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16)
                        else { return nil }
                        out.append(code)
                        position += 4
                    } else {
                        out.append(escaped)
                    }
                default:
                    out.append(byte)
                }
            }
            return nil
        }
    }
}
