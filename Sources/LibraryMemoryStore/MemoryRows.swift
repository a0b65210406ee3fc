import LibraryDomain

/// The memory store's data: the two tables in insertion order, the change log and the kept
/// `Idempotency-Key` answers. Used only while the store's lock is held.
final class MemoryData {
    var libraries: [String: LibraryRecord] = [:]
    var books: [String: BookRecord] = [:]
    /// Each table's rows by insertion order (`seq`, ascending): what lists page through.
    var libraryOrder: [Entry] = []
    var bookOrder: [Entry] = []
    /// The last `seq` given to a row, of either table (each table's order is all that matters).
    var lastRowSeq = 0
    /// The kept changes, oldest first, and the id of the latest.
    private(set) var log: [CommittedChange] = []
    private(set) var latestSeq = 0
    var answers: [String: (answer: RememberedAnswer, created: Int)] = [:]

    struct Entry {
        let seq: Int
        let id: String
    }

    /// Records `items` as the next change and returns it. Pruned as SQL stores prune: when a change
    /// id reaches a multiple of 64, to the latest `history` changes.
    func log(_ items: [ChangeItem], history: Int) -> CommittedChange {
        latestSeq += 1
        let change = CommittedChange(seq: latestSeq, items: items)
        log.append(change)
        if latestSeq % 64 == 0 {
            let firstKept = latestSeq - history + 1
            log.removeFirst(log.prefix { $0.seq < firstKept }.count)
        }
        return change
    }

    /// The logged changes after `seq` (through `last`, or every one) that concern `target`, each
    /// with just the items that do, as the SQL stores' replay reads them; nil when the log no
    /// longer holds every change after `seq`.
    func changes(of target: LiveTarget, after seq: Int, through last: Int?) -> [CommittedChange]? {
        guard (log.first?.seq ?? latestSeq + 1) <= seq + 1 else { return nil }
        let last = last ?? latestSeq
        var result: [CommittedChange] = []
        for change in log where change.seq > seq && change.seq <= last {
            let items = change.items.filter { Self.concerns($0, target) }
            if !items.isEmpty { result.append(CommittedChange(seq: change.seq, items: items)) }
        }
        return result
    }

    /// Whether a replay of `target` reads `item`: a book's own changes; a library's, its own and
    /// those of books in it or that left it; a book collection's, every book change (of its
    /// library and those that left it, when it names one); the libraries', every library change.
    private static func concerns(_ item: ChangeItem, _ target: LiveTarget) -> Bool {
        switch (item, target) {
        case (.book(let book, _, _, _), .book(let id)): book.id == id
        case (.library(let library, _, _), .library(let id)): library.id == id
        case (.book(let book, _, let before, _), .library(let id)): book.library == id || before?.library == id
        case (.book(let book, _, let before, _), .books(let filter)):
            filter.library.map { book.library == $0 || before?.library == $0 } ?? true
        case (.library, .libraries): true
        case (.book, .window(let window)): concerns(item, .books(window.query.filter.libraryOnly))
        case (.library, .book), (.library, .books), (.library, .window), (.book, .libraries): false
        }
    }

    /// Where `seq` goes in an insertion order: the first entry after it.
    static func position(after seq: Int, in order: [Entry]) -> Int {
        var (low, high) = (0, order.count)
        while low < high {
            let middle = (low + high) / 2
            if order[middle].seq <= seq { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// The rows of the memory store, for one read or one write: each change of a write is noted
/// with its inverse, so a write that fails is undone (`undo`).
final class MemoryRows: RecordRows {
    private let data: MemoryData
    private var undoLog: [() -> Void] = []

    init(_ data: MemoryData) {
        self.data = data
    }

    /// Takes back every change this write made, newest first.
    func undo() {
        while let step = undoLog.popLast() { step() }
    }

    // MARK: Reads

    func ping() throws {}

    func library(id: String) throws -> LibraryRecord? { data.libraries[id] }

    func libraries(sortedBy order: ListOrder<LibraryField>?, after start: ListStart, limit: Int, among: Set<String>?)
        throws -> Page<LibraryRecord>
    {
        let row = { (id: String) in among.map { $0.contains(id) } ?? true ? self.data.libraries[id] : nil }
        guard let order else { return page(data.libraryOrder, after: start.seq, limit: limit, row) }
        return sortedPage(data.libraryOrder, order, after: start, limit: limit, row)
    }

    func book(id: String) throws -> BookRecord? { data.books[id] }

    func books(_ query: BookQuery, after start: ListStart, limit: Int, among: Set<String>?) throws -> Page<BookRecord> {
        let row = { (id: String) in
            self.data.books[id].flatMap { book in
                query.matches(book) && among.map { $0.contains(book.library) } ?? true ? book : nil
            }
        }
        guard let order = query.order else { return page(data.bookOrder, after: start.seq, limit: limit, row) }
        return sortedPage(data.bookOrder, order, after: start, limit: limit, row)
    }

    func rememberedAnswer(forKey key: String, now: Int) throws -> RememberedAnswer? {
        guard let kept = data.answers[key], kept.created >= now - RememberedAnswer.retention else { return nil }
        return kept.answer
    }

    /// Up to `limit` rows after `seq` that `row` gives, and where the next page starts.
    private func page<Record: FieldRecord>(
        _ order: [MemoryData.Entry], after seq: Int, limit: Int, _ row: (String) -> Record?
    ) -> Page<Record> {
        var items: [Record] = []
        for entry in order[MemoryData.position(after: seq, in: order)...] {
            guard let record = row(entry.id) else { continue }
            if items.count == limit { return Page(items: items, next: items.last!.seq) }
            items.append(record)
        }
        return Page(items: items, next: nil)
    }

    /// Up to `limit` rows that `row` gives, in `order` from `start`: every row is read and sorted
    /// (this store has no index; it serves tests and previews, at their sizes).
    private func sortedPage<Record: FieldRecord>(
        _ entries: [MemoryData.Entry], _ order: ListOrder<Record.Field>, after start: ListStart, limit: Int,
        _ row: (String) -> Record?
    ) -> Page<Record> {
        var rows = entries.compactMap { row($0.id) }.map { ($0.position(in: order), $0) }
        if case .sorted(let after?) = start {
            rows.removeAll { !order.precedes(after.key, after.id, $0.0.key, $0.0.id) }
        }
        rows.sort { order.precedes($0.0.key, $0.0.id, $1.0.key, $1.0.id) }
        let items = rows.prefix(limit).map(\.1)
        return Page(items: Array(items), next: rows.count > limit ? items.last!.seq : nil)
    }

    // MARK: Writes

    func insertLibrary(_ draft: LibraryDraft, id: String, now: String) throws -> LibraryRecord {
        let library: LibraryRecord = newRecord(draft, id: id, now: now, order: \.libraryOrder)
        setLibrary(library, id: id)
        return library
    }

    func insertBook(_ draft: BookDraft, id: String, now: String) throws -> BookRecord {
        let book: BookRecord = newRecord(draft, id: id, now: now, order: \.bookOrder)
        setBook(book, id: id)
        return book
    }

    func updateLibrary(id: String, changing changed: [LibraryField], to draft: LibraryDraft, now: String) throws
        -> LibraryRecord
    {
        let library = updated(data.libraries[id]!, changing: changed, to: draft, now: now)
        setLibrary(library, id: id)
        return library
    }

    func updateBook(id: String, changing changed: [BookField], to draft: BookDraft, now: String) throws -> BookRecord {
        let book = updated(data.books[id]!, changing: changed, to: draft, now: now)
        setBook(book, id: id)
        return book
    }

    func deleteLibrary(id: String) throws -> [BookRecord] {
        let books = data.bookOrder.compactMap { data.books[$0.id] }.filter { $0.library == id }
        for book in books { try deleteBook(id: book.id) }
        setLibrary(nil, id: id)
        removeEntry(id, from: \.libraryOrder)
        return books
    }

    func deleteBook(id: String) throws {
        setBook(nil, id: id)
        removeEntry(id, from: \.bookOrder)
    }

    func adjustBookCount(ofLibrary id: String, by delta: Int, now: String) throws -> LibraryRecord? {
        guard var library = data.libraries[id] else { return nil }
        library.bookCount += delta
        library = stamped(library, now: now)
        setLibrary(library, id: id)
        return library
    }

    /// No single step here: every patch takes the general path.
    func updateSingleField(_ write: SingleFieldWrite, now: String) throws -> SingleFieldUpdate {
        .unsupported
    }

    func remember(_ answer: RememberedAnswer, forKey key: String, now: Int) throws {
        let expired = data.answers.filter { $0.value.created < now - RememberedAnswer.retention }
        let previous = data.answers[key]
        data.answers[key] = (answer, now)
        for key in expired.keys { data.answers[key] = nil }
        undoLog.append { [data] in
            data.answers[key] = previous
            data.answers.merge(expired) { current, _ in current }
        }
    }

    // MARK: Rows and their inverses

    private func setLibrary(_ library: LibraryRecord?, id: String) {
        let previous = data.libraries[id]
        data.libraries[id] = library
        undoLog.append { [data] in data.libraries[id] = previous }
    }

    private func setBook(_ book: BookRecord?, id: String) {
        let previous = data.books[id]
        data.books[id] = book
        undoLog.append { [data] in data.books[id] = previous }
    }

    private func removeEntry(_ id: String, from order: ReferenceWritableKeyPath<MemoryData, [MemoryData.Entry]>) {
        guard let index = data[keyPath: order].firstIndex(where: { $0.id == id }) else { return }
        let entry = data[keyPath: order].remove(at: index)
        undoLog.append { [data] in data[keyPath: order].insert(entry, at: index) }
    }

    /// A new row made of `draft`: version 1, created and updated `now`, counts at zero, as the
    /// SQL schema's defaults make it.
    /// Its place is taken at the end of `order`.
    private func newRecord<Record: FieldRecord>(
        _ draft: Record.Draft, id: String, now: String, order: ReferenceWritableKeyPath<MemoryData, [MemoryData.Entry]>
    ) -> Record {
        data.lastRowSeq += 1
        data[keyPath: order].append(MemoryData.Entry(seq: data.lastRowSeq, id: id))
        undoLog.append { [data] in data[keyPath: order].removeLast() }
        return Record(seq: data.lastRowSeq) { field in
            if Record.Field.writable.contains(field) { return draft[field] }
            switch field.descriptor.column {
            case "id": return .string(id)
            case "version": return .int(1)
            case "created_at", "updated_at": return .string(now)
            default: return .int(0)  // a count (a library's books), which starts at none
            }
        }
    }

    /// `record` with the `changed` fields set to `draft`'s values, a version more, updated `now`.
    private func updated<Record: FieldRecord>(
        _ record: Record, changing changed: [Record.Field], to draft: Record.Draft, now: String
    ) -> Record {
        stamped(Record(seq: record.seq) { changed.contains($0) ? draft[$0] : record[$0] }, now: now)
    }

    /// `record` as a write at `now` leaves it: its stamped fields (`ResourceField.stamped`) set, a
    /// version more and updated `now`.
    private func stamped<Record: FieldRecord>(_ record: Record, now: String) -> Record {
        Record(seq: record.seq) { field in
            guard field.descriptor.stamped else { return record[field] }
            return field.descriptor.kind == .timestamp ? .string(now) : .int(record[field].requiredInt + 1)
        }
    }
}
