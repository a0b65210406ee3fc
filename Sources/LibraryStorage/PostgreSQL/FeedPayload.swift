import JSON
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
        guard !rows.isEmpty else { return head }
        var json = JSONWriter(capacity: min(limit, 256 * rows.count))
        json.beginArray()
        for row in rows {
            json.beginArray()
            for value in row {
                switch value {
                case .null: json.null()
                case .integer(let number): json.int(Int(number))
                case .text(let text): json.string(text)
                case .real: return head  // no column of the log holds one
                }
            }
            json.endArray()
            if head.utf8.count + 1 + json.bytes.count >= limit { return head }
        }
        json.endArray()
        return head + " " + String(decoding: json.bytes, as: UTF8.self)
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
        let parts = payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, Int(parts[0]) != nil, !parts[1].isEmpty,
            case .array(let rows)? = try? JSONParser.parse(Array(parts[2].utf8)), !rows.isEmpty
        else { return nil }
        var decoded: [(Int, ChangeItem)] = []
        decoded.reserveCapacity(rows.count)
        for row in rows {
            guard case .array(let values) = row, values.count == ChangeLog.kinds.count else { return nil }
            var columns: [SQLiteValue] = []
            columns.reserveCapacity(values.count)
            for value in values {
                switch value {
                case .null: columns.append(.null)
                case .string(let text): columns.append(.text(text))
                case .number:
                    guard let number = value.integer else { return nil }
                    columns.append(.int(number))
                case .bool, .array, .object: return nil
                }
            }
            decoded.append(ChangeLog.item(SQLRow(values: columns)))
        }
        return ChangeLog.changes(decoded)
    }
}
