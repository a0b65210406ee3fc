import LibraryDomain

/// A watched window of a list of books (`/books/events?sort=title&limit=50`): its rows, kept equal
/// to the first `limit` rows of its query after every change, for the subscribers who may read
/// the libraries `readable` (nil: every one).
///
/// Most changes are decided from the change alone, since a window knows its rows and the order:
/// a book that sorts after the last row of a full window cannot enter it (no read), one that sorts
/// before it enters and pushes the last row out, a member changed in place stays. Only a member
/// that leaves a full window, or moves past its end, needs the row that now follows the end,
/// which the store alone knows: the window is read again, one page of the list's index
/// (`LiveStore.read(_:among:completion:)`), and the changes that arrive meanwhile are kept and
/// applied after it.
@LiveActor
final class LiveWindow {
    /// A row and its place in the order: the sort key (`SortKey`), or the insertion order.
    struct Row {
        let book: BookRecord
        let key: FieldValue
    }

    /// What a change did to the rows.
    enum Step {
        case untouched
        case changed
        /// A member left a full window, or moved past its end: the rows must be read.
        case needsRead
    }

    /// Which window, for whom: subscribers who may read different libraries see different rows.
    struct Key: Hashable {
        let window: BookWindow
        let readable: Set<String>?
    }

    let key: Key
    var window: BookWindow { key.window }
    /// The rows, in order: what the subscribers were told, but while a read is under way.
    private(set) var rows: [Row] = []
    private var members: Set<String> = []
    /// The latest change the rows include.
    private(set) var seq = 0
    /// Whether the rows were ever read: before, subscribers wait for them.
    private(set) var loaded = false
    /// While a read is under way: the rows as subscribers last saw them, and the changes that
    /// arrived since it started (applied to what it returns, those it did not see).
    private(set) var told: [Row]?
    private(set) var later: [CommittedChange] = []
    /// More changes arrived during the read than are worth keeping: read again after it.
    private var readAgain = false
    /// Subscribers waiting for the rows, to be sent them as a snapshot.
    var joiners: [Subscriber] = []

    /// How many changes a read under way keeps before it is simply read again after.
    static let maxLater = 1_000

    init(_ key: Key) {
        self.key = key
    }

    var isReading: Bool { told != nil }

    /// Starts a read: the rows as told (`rows` unless given) are kept to be compared with what
    /// it returns.
    func beginRead(told rows: [Row]? = nil) {
        if told == nil { told = rows ?? self.rows }
        later = []
        readAgain = false
    }

    /// A change that concerns the window while a read is under way.
    func keep(_ change: CommittedChange) {
        guard !readAgain else { return }
        if later.count == Self.maxLater {
            later = []
            readAgain = true
        } else {
            later.append(change)
        }
    }

    /// The read's rows (as of change `readSeq`), with the changes it did not see applied. False
    /// when the window must be read again.
    func endRead(_ books: [BookRecord], readSeq: Int) -> Bool {
        rows = books.map { Row(book: $0, key: sortKey(of: $0)) }
        members = Set(books.map(\.id))
        seq = max(seq, readSeq)
        let pending = later
        later = []
        if readAgain { return false }
        for change in pending where change.seq > readSeq {
            if apply(change) == .needsRead { return false }
        }
        loaded = true
        return true
    }

    /// The rows as subscribers last saw them, now that they are settled.
    func takeTold() -> [Row] {
        defer { told = nil }
        return told ?? rows
    }

    /// Applies a committed change to the rows, when it can be from the change alone.
    func apply(_ change: CommittedChange) -> Step {
        var step = Step.untouched
        for case .book(let book, _, _, let deleted) in change.items {
            let isMember = members.contains(book.id)
            let matches = !deleted && (key.readable?.contains(book.library) ?? true) && window.query.matches(book)
            guard isMember || matches else { continue }
            let row = Row(book: book, key: sortKey(of: book))
            let inside = matches && followsStart(row)
            let full = rows.count == window.limit
            if isMember {
                let index = rows.firstIndex { $0.book.id == book.id }!
                let old = rows.remove(at: index)
                members.remove(book.id)
                step = .changed
                if inside {
                    let place = insertionIndex(of: row)
                    // Past the last row of a full window: a row beyond it may now come first.
                    if full && place == rows.count && precedes(old, row) { return .needsRead }
                    rows.insert(row, at: place)
                    members.insert(book.id)
                } else if full {
                    return .needsRead
                }
            } else if inside {
                if full, let last = rows.last, !precedes(row, last) { continue }
                rows.insert(row, at: insertionIndex(of: row))
                members.insert(book.id)
                if rows.count > window.limit { members.remove(rows.removeLast().book.id) }
                step = .changed
            }
        }
        if step == .changed { seq = max(seq, change.seq) }
        return step
    }

    // MARK: The order

    private func sortKey(of book: BookRecord) -> FieldValue {
        guard let order = window.query.order else { return .int(book.seq) }
        return SortKey.of(book[order.field], order.field.descriptor)
    }

    private func precedes(_ a: Row, _ b: Row) -> Bool {
        guard let order = window.query.order else { return a.book.seq < b.book.seq }
        return order.precedes(a.key, a.book.id, b.key, b.book.id)
    }

    private func followsStart(_ row: Row) -> Bool {
        switch window.start {
        case .seq(let seq): row.book.seq > seq
        case .sorted(nil): true
        case .sorted(let position?): window.query.order!.precedes(position.key, position.id, row.key, row.book.id)
        }
    }

    /// Where `row` goes among the rows: after every row that precedes it.
    private func insertionIndex(of row: Row) -> Int {
        var (low, high) = (0, rows.count)
        while low < high {
            let middle = (low + high) / 2
            if precedes(rows[middle], row) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// What subscribers are told when the rows go from `old` to the current ones: the books that
    /// joined (every field), left, or changed (the fields that differ). Nil when nothing did.
    func delta(from old: [Row]) -> ResourceDelta? {
        var delta = ResourceDelta(id: "")
        delta.isCollection = true
        var before: [String: BookRecord] = [:]
        for row in old { before[row.book.id] = row.book }
        for row in rows {
            let book = row.book
            guard let previous = before.removeValue(forKey: book.id) else {
                delta.added.append(.init(id: book.id, fields: ResourceDelta.values(BookField.all) { book[$0] }))
                continue
            }
            // A row of the same version is the same row (every write counts a version).
            guard previous.version != book.version else { continue }
            let changed = BookField.allCases.filter { $0 != .id && previous[$0] != book[$0] }
            if !changed.isEmpty {
                delta.changed.append(.init(id: book.id, fields: ResourceDelta.values(Set(changed)) { book[$0] }))
            }
        }
        delta.removed = old.compactMap { before[$0.book.id] != nil ? $0.book.id : nil }
        return delta.added.isEmpty && delta.removed.isEmpty && delta.changed.isEmpty ? nil : delta
    }
}
