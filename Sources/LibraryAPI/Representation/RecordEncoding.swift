import LibraryDomain

extension JSONWriter {
    /// Writes a record with `id` and the selected fields, in table order.
    mutating func record<Record: FieldRecord>(_ record: Record, _ fields: FieldSelection<Record.Field>) {
        beginObject()
        for field in Record.Field.allCases where fields.contains(field) || field.rawValue == "id" {
            key(field.rawValue)
            value(record[field])
        }
        endObject()
    }

    /// Writes a library with `id` and the selected fields.
    mutating func library(_ library: LibraryRecord, _ fields: FieldSelection<LibraryField> = .all) {
        record(library, fields)
    }

    /// Writes a book with `id` and the selected fields.
    mutating func book(_ book: BookRecord, _ fields: FieldSelection<BookField> = .all) {
        record(book, fields)
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
