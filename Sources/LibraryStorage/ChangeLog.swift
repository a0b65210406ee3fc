import LibraryDomain
import SQLite

/// The durable change log (`changes` and `change_items`), written in the same transaction as the
/// change it records, so an event id never names a change that was rolled back.
enum ChangeLog {
    /// Records `items` as one change and returns its sequence number.
    static func append(_ items: [ChangeItem], history: Int, to connection: Connection) throws -> Int {
        let seq = try connection.statement("INSERT INTO changes (committed_at) VALUES (?) RETURNING seq")
            .first([.text(Timestamp.now())]) { $0.int(0) }!
        let insert = try connection.statement(
            """
            INSERT INTO change_items (seq, entity, entity_id, deleted, fields, previous_library_id, library_id, name,
                address, book_count, title, author, isbn, published_year, available, version, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        )
        for item in items {
            switch item {
            case .library(let library, let fields, let deleted):
                try insert.run([
                    .int(seq), "library", .text(library.id), .bool(deleted), .text(names(fields)), nil, nil,
                    .text(library.name), .optional(library.address), .int(library.bookCount), nil, nil, nil, nil, nil,
                    .int(library.version), .text(library.createdAt), .text(library.updatedAt),
                ])
            case .book(let book, let fields, let previous, let deleted):
                try insert.run([
                    .int(seq), "book", .text(book.id), .bool(deleted), .text(names(fields)), .optional(previous),
                    .text(book.libraryId), nil, nil, nil, .text(book.title), .text(book.author), .optional(book.isbn),
                    .optional(book.publishedYear), .bool(book.available), .int(book.version), .text(book.createdAt),
                    .text(book.updatedAt),
                ])
            }
        }
        if seq % 64 == 0 {
            try connection.statement("DELETE FROM changes WHERE seq <= ?").run([.int(seq - history)])
        }
        return seq
    }

    private static func names<Field: RawRepresentable>(_ fields: Set<Field>) -> String where Field.RawValue == String {
        fields.map(\.rawValue).sorted().joined(separator: ",")
    }
}

extension LibraryReader {
    /// The sequence number of the latest committed change (0 before any).
    package func latestSeq() throws -> Int {
        try connection.statement("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").first { $0.int(0) } ?? 0
    }

    /// The oldest change still in the log (`latestSeq() + 1` when the log is empty).
    package func oldestKeptSeq() throws -> Int {
        let oldest = try connection.statement("SELECT min(seq) FROM changes").first { $0.optionalInt(0) }
        if let oldest = oldest ?? nil { return oldest }
        return try latestSeq() + 1
    }

    /// Every book of a library, in insertion order.
    package func allBooks(inLibrary id: String) throws -> [BookRecord] {
        try connection.statement("SELECT \(LibraryReader.bookColumns) FROM books WHERE library_id = ? ORDER BY seq")
            .map([.text(id)], LibraryReader.book)
    }

    /// The logged changes after `seq` (up to `through`) that concern the book `id`, in order.
    package func changes(ofBook id: String, after seq: Int, through last: Int) throws -> [CommittedChange] {
        try changes(
            where: "entity = 'book' AND entity_id = ?",
            [.text(id)],
            after: seq,
            through: last
        )
    }

    /// The logged changes after `seq` (up to `through`) that concern the library `id` or its
    /// membership (books created in, moved into or out of, or deleted from it), in order.
    package func changes(ofLibrary id: String, after seq: Int, through last: Int) throws -> [CommittedChange] {
        try changes(
            where: "entity_id = ? OR library_id = ? OR previous_library_id = ?",
            [.text(id), .text(id), .text(id)],
            after: seq,
            through: last
        )
    }

    private func changes(
        where condition: String,
        _ values: [SQLiteValue],
        after seq: Int,
        through last: Int
    ) throws -> [CommittedChange] {
        let rows = try connection.statement(
            """
            SELECT seq, entity, entity_id, deleted, fields, previous_library_id, library_id, name, address, book_count,
                title, author, isbn, published_year, available, version, created_at, updated_at
            FROM change_items WHERE (\(condition)) AND seq > ? AND seq <= ? ORDER BY seq, rowid
            """
        ).map(values + [.int(seq), .int(last)]) { row -> (Int, ChangeItem) in
            let fields = row.text(4).split(separator: ",").map(String.init)
            if row.text(1) == "library" {
                let library = LibraryRecord(
                    id: row.text(2), name: row.text(7), address: row.optionalText(8), bookCount: row.int(9),
                    version: row.int(15), createdAt: row.text(16), updatedAt: row.text(17), seq: 0
                )
                return (
                    row.int(0),
                    .library(library, fields: Set(fields.compactMap(LibraryField.init)), deleted: row.bool(3))
                )
            }
            let book = BookRecord(
                id: row.text(2), libraryId: row.text(6), title: row.text(10), author: row.text(11),
                isbn: row.optionalText(12), publishedYear: row.optionalInt(13), available: row.bool(14),
                version: row.int(15), createdAt: row.text(16), updatedAt: row.text(17), seq: 0
            )
            return (
                row.int(0),
                .book(
                    book, fields: Set(fields.compactMap(BookField.init)), previousLibraryID: row.optionalText(5),
                    deleted: row.bool(3)
                )
            )
        }
        var result: [CommittedChange] = []
        for (seq, item) in rows {
            if let last = result.last, last.seq == seq {
                result[result.count - 1] = CommittedChange(seq: seq, items: last.items + [item])
            } else {
                result.append(CommittedChange(seq: seq, items: [item]))
            }
        }
        return result
    }
}
