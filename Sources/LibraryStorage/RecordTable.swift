import LibraryDomain
import SQLite

/// The SQL of a resource's table, made from the field table: the columns reads select and writes
/// return, row decoding by the position each column was selected at, and the columns a create sets.
/// No statement of either engine names a field's column by hand.
struct RecordTable<Record: FieldRecord>: Sendable {
    typealias Field = Record.Field

    /// The table's name.
    let name: String
    /// `seq`, then every field's column in table order: what reads select and writes return.
    let columns: String
    /// Each field's kind and nullability, by position (read per row without copying a table row).
    private let shapes: [FieldShape]
    /// `INSERT INTO name (…) VALUES (…) RETURNING columns`: `id`, every writable field's column and
    /// the two timestamps, whose values `insertValues` gives in the same order.
    let insert: String

    init(name: String) {
        self.name = name
        columns = (["seq"] + Field.table.map(\.column)).joined(separator: ", ")
        shapes = Field.table.map(FieldShape.init)
        let set = ["id"] + Field.writable.map { $0.descriptor.column } + ["created_at", "updated_at"]
        insert = """
            INSERT INTO \(name) (\(set.joined(separator: ", "))) VALUES (\(set.map { _ in "?" }.joined(separator: ", ")))
            RETURNING \(columns)
            """
    }

    /// The record in a row of `columns`, where a field's column follows `seq` at the field's position.
    func record(_ row: SQLRow) -> Record {
        var timestamp: String?
        return Record(seq: row.int(0)) { value(row, $0, after: &timestamp) }
    }

    /// The same, where `field`'s value is known to be `value` (the library of every book a
    /// library's load reads): one string shared by every record, not one made per row.
    func record(_ row: SQLRow, knowing field: Record.Field, is known: FieldValue) -> Record {
        var timestamp: String?
        return Record(seq: row.int(0)) { $0 == field ? known : value(row, $0, after: &timestamp) }
    }

    /// The value of `field`'s column. A timestamp with the bytes of the row's timestamp before it
    /// is that one's string, not a new one: a resource never changed has two equal timestamps, and
    /// a million books read for a load then make a million strings fewer (64 MiB).
    private func value(_ row: SQLRow, _ field: Field, after timestamp: inout String?) -> FieldValue {
        let (index, shape) = (Int32(field.rawValue + 1), shapes[field.rawValue])
        guard shape.kind == .timestamp, !(shape.nullable && row.isNull(index)) else { return row.value(index, shape) }
        let text = timestamp.flatMap { row.text(index, ifSameAs: $0) } ?? row.text(index)
        timestamp = text
        return .string(text)
    }

    /// The values of `insert` for a new resource `id` made of `draft` at `now`.
    func insertValues(id: String, _ draft: Record.Draft, now: String) -> [SQLiteValue] {
        [.text(id)] + Field.writable.map { SQLiteValue(draft[$0]) } + [.text(now), .text(now)]
    }
}

/// The two tables of resources.
enum Tables {
    static let libraries = RecordTable<LibraryRecord>(name: "libraries")
    static let books = RecordTable<BookRecord>(name: "books")
}

/// What decoding a field's column needs to know of it.
struct FieldShape: Sendable {
    let kind: FieldKind
    let nullable: Bool

    init(_ descriptor: FieldDescriptor) { self.init(kind: descriptor.kind, nullable: descriptor.nullable) }

    init(kind: FieldKind, nullable: Bool) {
        self.kind = kind
        self.nullable = nullable
    }
}

extension SQLRow {
    /// The value at `index` of a column that holds a field of `shape`.
    func value(_ index: Int32, _ shape: FieldShape) -> FieldValue {
        if shape.nullable && isNull(index) { return .null }
        switch shape.kind {
        case .identifier, .text, .timestamp: return .string(text(index))
        case .integer: return .int(int(index))
        case .boolean: return .bool(bool(index))
        }
    }
}

extension SQLiteValue {
    /// A field's value as a parameter of either engine (a boolean as 0 or 1).
    init(_ value: FieldValue) {
        switch value {
        case .string(let text): self = .text(text)
        case .int(let number): self = .int(number)
        case .bool(let truth): self = .bool(truth)
        case .null: self = .null
        }
    }
}

extension FieldKind {
    /// The PostgreSQL array type a column of this kind is sent as (the change log's `unnest`).
    var postgresArray: String {
        switch self {
        case .identifier, .text, .timestamp: "text[]"
        case .integer: "bigint[]"
        case .boolean: "boolean[]"
        }
    }
}
