/// The writes of libraries and books and their rules, run inside one transaction by a store's
/// `write`, over the rows of whichever engine (`RecordRows`).
///
/// Each method checks existence (404), then the principal's rights (403), then the values (422),
/// then `If-Match` (412), and writes nothing when the new values equal the stored ones, so
/// `version` counts real changes only. A library the principal cannot read, and its books, are
/// answered exactly as ones that do not exist, after the same reads.
/// Every resource it changes is noted as a `ChangeItem`, for the change log and the live models.
package final class LibraryWriter {
    /// The engine's rows in this write's transaction.
    package let rows: any RecordRows
    /// What this write changed, one item per resource, in the order first touched.
    package private(set) var items: [ChangeItem] = []
    private var itemIndex: [String: Int] = [:]
    /// The fields every write of a book, or of a library, changes besides what it was asked to.
    private static let bookStamps = Set(BookField.stamped)
    private static let libraryStamps = Set(LibraryField.stamped)

    /// What the principal behind this write may do; every right unless the API says otherwise.
    package var rights = AccessRights.everything

    package init(rows: any RecordRows) {
        self.rows = rows
    }

    /// Reads within the same transaction.
    package var reader: any LibraryReader { rows }

    package func createLibrary(_ draft: LibraryDraft) throws -> LibraryRecord {
        guard rights.admin else { throw StoreError(.forbidden("Creating a library needs the admin right.")) }
        try Self.check(draft.validate())
        let library = try rows.insertLibrary(draft, id: Identifier.make(), now: Timestamp.now())
        note(.library(library, fields: library.changedFields(from: nil), deleted: false))
        return library
    }

    /// Replaces the writable fields with `change(current)`.
    package func updateLibrary(
        id: String,
        if precondition: Precondition,
        _ change: (LibraryDraft) -> LibraryDraft
    ) throws -> LibraryRecord {
        let current = try readable(rows.library(id: id))
        try requireWrite(current.id)
        let draft = change(current.draft)
        try Self.check(draft.validate())
        try check(precondition, version: current.version)
        guard draft != current.draft else { return current }
        let changed = LibraryField.writable.filter { draft[$0] != current.draft[$0] }
        let library = try rows.updateLibrary(id: id, changing: changed, to: draft, now: Timestamp.now())
        note(.library(library, fields: library.changedFields(from: current), deleted: false))
        return library
    }

    /// Deletes a library and its books; returns the library as it was and its books' ids.
    package func deleteLibrary(id: String, if precondition: Precondition) throws -> (LibraryRecord, bookIDs: [String]) {
        let current = try readable(rows.library(id: id))
        guard rights.admin else { throw StoreError(.forbidden("Deleting a library needs the admin right.")) }
        try check(precondition, version: current.version)
        let books = try rows.deleteLibrary(id: id)
        for book in books {
            note(.book(book, fields: [], before: book.keys, deleted: true))
        }
        note(.library(current, fields: [], deleted: true))
        return (current, books.map(\.id))
    }

    package func createBook(_ draft: BookDraft) throws -> BookRecord {
        try Self.check(draft.validate())
        try requireLibrary(draft.library)
        try requireWrite(draft.library)
        let now = Timestamp.now()
        let book = try rows.insertBook(draft, id: Identifier.make(), now: now)
        try adjustBookCount(of: draft.library, by: 1, at: now)
        note(.book(book, fields: book.changedFields(from: nil), before: nil, deleted: false))
        return book
    }

    /// Replaces the writable fields with `change(current)`; a new library (`BookField.library`) moves the book.
    package func updateBook(id: String, if precondition: Precondition, _ change: (BookDraft) -> BookDraft) throws
        -> BookRecord
    {
        let current = try readable(rows.book(id: id))
        try requireWrite(current.library)
        let draft = change(current.draft)
        try Self.check(draft.validate())
        if draft.library != current.library {
            try requireLibrary(draft.library)
            try requireWrite(draft.library)
        }
        try check(precondition, version: current.version)
        guard draft != current.draft else { return current }
        let now = Timestamp.now()
        if draft.library != current.library {
            try adjustBookCount(of: current.library, by: -1, at: now)
            try adjustBookCount(of: draft.library, by: 1, at: now)
        }
        let changed = BookField.writable.filter { draft[$0] != current.draft[$0] }
        let book = try rows.updateBook(id: id, changing: changed, to: draft, now: now)
        note(
            .book(book, fields: book.changedFields(from: current), before: current.keys, deleted: false)
        )
        return book
    }

    /// Applies a merge patch. A valid patch of one field (the common PATCH) is first offered to
    /// the engine as one step (`RecordRows.updateSingleField`: on SQL one `UPDATE … RETURNING`
    /// with no read before it, which sets the field only where the row exists, passes the
    /// precondition and holds another value, so a row back means exactly that field changed).
    /// Anything else (nothing changed: missing, stale or unchanged; several fields; a move;
    /// invalid values; an engine without the step) takes `updateBook`, which reads first and
    /// answers 404, 422, 412 in order.
    ///
    /// A field lists filter by also needs its value before the change (a collection the book
    /// leaves): the engine's when it read it in the same step, else a boolean's other value.
    package func patchBook(id: String, if precondition: Precondition, _ patch: BookPatch) throws -> BookRecord {
        try patchBook(id: id, if: precondition, patch, plan: Self.singleFieldWrite(id: id, if: precondition, patch))
    }

    /// `patchBook(id:if:_:)` with the patch's `singleFieldWrite` already worked out by the caller,
    /// which told the store about it ahead of the write.
    package func patchBook(id: String, if precondition: Precondition, _ patch: BookPatch, plan: SingleFieldWrite?)
        throws -> BookRecord
    {
        // The one statement checks no right: it is taken only by a principal who may write every library.
        if let single = plan, rights.write == .all,
            case .updated(let book, let previousValue) = try rows.updateSingleField(single, now: Timestamp.now())
        {
            let field = single.field
            var before = book.keys
            if let previousValue {
                before[field] = previousValue
            } else if field.descriptor.filterable, case .bool(let now) = single.value {
                before[field] = .bool(!now)
            }
            note(.book(book, fields: Self.bookStamps.union([field]), before: before, deleted: false))
            return book
        }
        return try updateBook(id: id, if: precondition) { patch.applied(to: $0) }
    }

    /// Deletes a book; returns it as it was.
    package func deleteBook(id: String, if precondition: Precondition) throws -> BookRecord {
        let current = try readable(rows.book(id: id))
        try requireWrite(current.library)
        try check(precondition, version: current.version)
        try rows.deleteBook(id: id)
        try adjustBookCount(of: current.library, by: -1, at: Timestamp.now())
        note(.book(current, fields: [], before: current.keys, deleted: true))
        return current
    }

    /// The answer kept for an `Idempotency-Key`, if any.
    package func rememberedAnswer(forKey key: String) throws -> RememberedAnswer? {
        try rows.rememberedAnswer(forKey: key, now: Timestamp.secondsSince1970())
    }

    /// Keeps `answer` for `key`, in this write's transaction.
    package func remember(_ answer: RememberedAnswer, forKey key: String) throws {
        try rows.remember(answer, forKey: key, now: Timestamp.secondsSince1970())
    }

    /// The record when it exists and the principal may read its library; else a 404, the same
    /// for both.
    private func readable(_ library: LibraryRecord?) throws -> LibraryRecord {
        guard let library, rights.reads(library.id) else { throw StoreError(.notFound) }
        return library
    }

    private func readable(_ book: BookRecord?) throws -> BookRecord {
        guard let book, rights.reads(book.library) else { throw StoreError(.notFound) }
        return book
    }

    /// A 403 unless the principal may write the library `id` (which it may read).
    private func requireWrite(_ id: String) throws {
        guard rights.writes(id) else {
            throw StoreError(.forbidden("This token may read library \(id) but not change it."))
        }
    }

    /// Checked after the content is known to be acceptable (RFC 9110 §13.2.1), so a request that
    /// is wrong in two ways gets the same answer whatever the stored version: 404, then 422, then 412.
    private func check(_ precondition: Precondition, version: Int) throws {
        guard precondition.allows(version) else { throw StoreError(.preconditionFailed) }
    }

    /// A 422 unless the library `id` exists and the principal may read it: one it cannot read
    /// gets the same answer as one that does not exist.
    private func requireLibrary(_ id: String) throws {
        guard try rows.library(id: id) != nil, rights.reads(id) else {
            throw StoreError(.invalid([FieldError(BookField.library.name, "no library has this id")]))
        }
    }

    /// A book joining or leaving changes the library's `bookCount`, which is a change of the library.
    private func adjustBookCount(of libraryID: String, by delta: Int, at now: String) throws {
        if let library = try rows.adjustBookCount(ofLibrary: libraryID, by: delta, now: now) {
            note(.library(library, fields: Self.libraryStamps.union([.bookCount]), deleted: false))
        }
    }

    private func note(_ item: ChangeItem) {
        if let index = itemIndex[item.key] {
            items[index] = items[index].merged(with: item)
        } else {
            itemIndex[item.key] = items.count
            items.append(item)
        }
    }

    private static func check(_ errors: [FieldError]) throws {
        if !errors.isEmpty { throw StoreError(.invalid(errors)) }
    }
}

extension LibraryWriter {
    /// The one-statement write a `PATCH` of `patch` is, when it is one: a patch of exactly one
    /// field with a valid value (`RecordRows.updateSingleField` then either is the whole write or
    /// changes nothing). Known before the write runs, so a store can send that statement ahead,
    /// with others (PostgreSQL's writer pipelines a batch's: `LibraryDatabase.write(_:plan:completion:)`).
    package static func singleFieldWrite(id: String, if precondition: Precondition, _ patch: BookPatch)
        -> SingleFieldWrite?
    {
        guard patch.values.count == 1, let (field, value) = patch.values.first,
            field.descriptor.errors(in: value).isEmpty
        else { return nil }
        return SingleFieldWrite(book: id, field: field, value: value, precondition: precondition)
    }
}

/// A `PATCH` that sets one field of one book (`LibraryWriter.singleFieldWrite`).
package struct SingleFieldWrite: Sendable {
    package let book: String
    package let field: BookField
    package let value: FieldValue
    package let precondition: Precondition
}
