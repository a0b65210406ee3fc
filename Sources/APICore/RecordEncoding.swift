import JSON
import LibraryDomain

extension JSONWriter {
    /// A field value as JSON.
    package mutating func value(_ value: FieldValue) {
        switch value {
        case .string(let text): string(text)
        case .int(let number): int(number)
        case .bool(let flag): bool(flag)
        case .null: null()
        }
    }

    /// `value`, appended to `bytes` as JSON.
    package static func append(_ value: FieldValue, to bytes: inout [UInt8]) {
        switch value {
        case .string(let text): appendString(text, to: &bytes)
        case .int(let number): appendInt(number, to: &bytes)
        case .bool(let flag): appendBool(flag, to: &bytes)
        case .null: appendNull(to: &bytes)
        }
    }

    /// Writes a record with `id` and the selected fields, in table order; `keys` are its fields'
    /// keys, by position (`JSONKeys`).
    package mutating func record<Record: FieldRecord>(
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
    package mutating func library(_ library: LibraryRecord, _ fields: FieldSelection<LibraryField> = .all) {
        record(library, fields, keys: JSONKeys.library)
    }

    /// Writes a book with `id` and the selected fields.
    package mutating func book(_ book: BookRecord, _ fields: FieldSelection<BookField> = .all) {
        record(book, fields, keys: JSONKeys.book)
    }

    /// Writes `{"items": [...], "nextCursor": ...}`.
    /// A list page: its items and the cursor of the next page, of `order` (insertion order when nil).
    package mutating func page<Record: FieldRecord>(
        _ page: Page<Record>, order: ListOrder<Record.Field>? = nil, item write: (inout JSONWriter, Record) -> Void
    ) {
        beginObject()
        key("items")
        beginArray()
        for item in page.items { write(&self, item) }
        endArray()
        key("nextCursor")
        if page.next != nil, let order, let last = page.items.last {
            string(Cursor.encode(last.position(in: order), in: order))
        } else {
            string(page.next.map(Cursor.encode))
        }
        endObject()
    }
}

/// Each field's key, written out once as `"name":`, by the field's position.
package enum JSONKeys {
    package static let library = keys(LibraryField.self)
    package static let book = keys(BookField.self)

    package static func keys<Field: ResourceField>(_: Field.Type) -> [[UInt8]] { Field.names.map { key($0) } }

    /// `"name":`.
    package static func key(_ name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return bytes
    }

    /// What opens a member of a snapshot's table: `{"id":`.
    package static let memberStart = Array("{".utf8) + key("id")
}
