import LibraryDomain

extension JSONWriter {
    /// Writes a library with `id` and the selected fields.
    mutating func library(_ library: LibraryRecord, _ fields: FieldSelection<LibraryField> = .all) {
        beginObject()
        key("id")
        string(library.id)
        if fields.contains(.name) {
            key("name")
            string(library.name)
        }
        if fields.contains(.address) {
            key("address")
            string(library.address)
        }
        if fields.contains(.bookCount) {
            key("bookCount")
            int(library.bookCount)
        }
        if fields.contains(.version) {
            key("version")
            int(library.version)
        }
        if fields.contains(.createdAt) {
            key("createdAt")
            string(library.createdAt)
        }
        if fields.contains(.updatedAt) {
            key("updatedAt")
            string(library.updatedAt)
        }
        endObject()
    }

    /// Writes a book with `id` and the selected fields.
    mutating func book(_ book: BookRecord, _ fields: FieldSelection<BookField> = .all) {
        beginObject()
        key("id")
        string(book.id)
        if fields.contains(.libraryId) {
            key("libraryId")
            string(book.libraryId)
        }
        if fields.contains(.title) {
            key("title")
            string(book.title)
        }
        if fields.contains(.author) {
            key("author")
            string(book.author)
        }
        if fields.contains(.isbn) {
            key("isbn")
            string(book.isbn)
        }
        if fields.contains(.publishedYear) {
            key("publishedYear")
            int(book.publishedYear)
        }
        if fields.contains(.available) {
            key("available")
            bool(book.available)
        }
        if fields.contains(.version) {
            key("version")
            int(book.version)
        }
        if fields.contains(.createdAt) {
            key("createdAt")
            string(book.createdAt)
        }
        if fields.contains(.updatedAt) {
            key("updatedAt")
            string(book.updatedAt)
        }
        endObject()
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
