import JSON
import LibraryDomain

extension JSONWriter {
    /// Writes a record with `id` and the selected fields, in table order; `keys` are its fields'
    /// keys, by position (`JSONKeys`).
    mutating func record<Record: FieldRecord>(
        _ record: Record, _ fields: FieldSelection<Record.Field>, keys: [[UInt8]]
    ) {
        beginObject()
        for field in Record.Field.allCases where fields.contains(field) || field.name == "id" {
            key(bytes: keys[field.rawValue])
            value(record[field])
        }
        endObject()
    }

    /// Writes a library with `id` and the selected fields.
    mutating func library(_ library: LibraryRecord, _ fields: FieldSelection<LibraryField> = .all) {
        record(library, fields, keys: JSONKeys.library)
    }

    /// Writes a book with `id` and the selected fields.
    mutating func book(_ book: BookRecord, _ fields: FieldSelection<BookField> = .all) {
        record(book, fields, keys: JSONKeys.book)
    }

    /// Writes `{"items": [...], "nextCursor": ...}`.
    mutating func page<Item>(_ page: Page<Item>, item write: (inout JSONWriter, Item) -> Void) {
        beginObject()
        key("items")
        beginArray()
        for item in page.items { write(&self, item) }
        endArray()
        key("nextCursor")
        string(page.next.map(Cursor.encode))
        endObject()
    }
}

/// Each field's key, written out once as `"name":`, by the field's position.
enum JSONKeys {
    static let library = keys(LibraryField.self)
    static let book = keys(BookField.self)

    static func keys<Field: ResourceField>(_: Field.Type) -> [[UInt8]] { Field.names.map { key($0) } }

    /// `"name":`.
    static func key(_ name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return bytes
    }

    /// What opens a member of a snapshot's table: `{"id":`.
    static let memberStart = Array("{".utf8) + key("id")
}
