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
    /// A row and its place in the order: the sort key (`SortKey`), or the insertion order. A
    /// class, so that moving rows moves references, not records.
    final class Row {
        let book: BookRecord
        let key: FieldValue

        init(book: BookRecord, key: FieldValue) {
            self.book = book
            self.key = key
        }
    }

    /// What a change did to the rows.
    enum Step {
        case untouched
        /// What the subscribers are told.
        case changed(ResourceDelta)
        /// A member left a full window, or moved past its end: the rows must be read.
        case needsRead
    }

    /// Which window, for whom: subscribers who may read different libraries see different rows.
    struct Key: Hashable {
        let window: BookWindow
        let readable: Set<String>?
    }

    let key: Key
    let window: BookWindow
    let readable: Set<String>?
    /// The rows, in order: what the subscribers were told, but while a read is under way.
    private(set) var rows: [Row] = []
    /// The rows by id.
    private var members: [String: Row] = [:]
    /// The latest change the rows include.
    private(set) var seq = 0
    /// Whether the rows were ever read: before, subscribers wait for them.
    private(set) var loaded = false
    /// While a read is under way: the rows as subscribers last saw them, and the changes that
    /// arrived since it started (applied to what it returns, those it did not see).
    private var told: [Row]?
    private var later: [CommittedChange] = []
    /// More changes arrived during the read than are worth keeping: read again after it.
    private var readAgain = false
    /// Subscribers waiting for the rows, to be sent them as a snapshot.
    var joiners: [Subscriber] = []
    /// The audience of its target (windows of other rights share it); it outlives the window,
    /// which closes when its last subscriber goes.
    weak var audience: Audience?

    /// How many changes a read under way keeps before it is simply read again after.
    static let maxLater = 1_000

    /// The list it belongs to.
    weak var group: WindowGroup?
    /// Where it starts in the list's order (nil: at the top).
    let start: WindowGroup.Position?

    init(_ key: Key) {
        self.key = key
        window = key.window
        readable = key.readable
        switch key.window.start {
        case .seq(let seq): start = seq == 0 ? nil : WindowGroup.Position(key: .int(seq), id: "")
        case .sorted(let position): start = position.map { WindowGroup.Position(key: $0.key, id: $0.id) }
        }
    }

    /// Where it ends: its last row when it is full and not being read, else nil (any row after
    /// its start may be in it).
    var end: WindowGroup.Position? {
        guard rows.count == window.limit, !isReading, let last = rows.last else { return nil }
        return WindowGroup.Position(key: last.key, id: last.book.id)
    }

    var memberIDs: Dictionary<String, Row>.Keys { members.keys }

    /// Sets the row of `id` (nil: none), telling the group which books its windows hold.
    private func setMember(_ id: String, _ row: Row?) {
        if let row {
            if members.updateValue(row, forKey: id) == nil { group?.joined(id) }
        } else if members.removeValue(forKey: id) != nil {
            group?.left(id)
        }
    }

    var isReading: Bool { told != nil }

    /// Starts a read: the rows as told are kept to be compared with what it returns.
    func beginRead() {
        if told == nil {
            told = rows
            group?.readStarted()
        }
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
        for id in members.keys { group?.left(id) }
        members = Dictionary(rows.map { ($0.book.id, $0) }, uniquingKeysWith: { $1 })
        for id in members.keys { group?.joined(id) }
        group?.rowsChanged()
        seq = max(seq, readSeq)
        let pending = later
        later = []
        if readAgain { return false }
        for change in pending where change.seq > readSeq {
            if case .needsRead = apply(change) { return false }
        }
        loaded = true
        return true
    }

    /// The rows as subscribers last saw them, now that they are settled.
    func takeTold() -> [Row] {
        defer {
            if told != nil { group?.readEnded() }
            told = nil
        }
        return told ?? rows
    }

    /// Applies a committed change to the rows, when it can be from the change alone: returns the
    /// delta subscribers are sent (nil when the rows did not change), or that the rows must be
    /// read (they are then as before the change).
    func apply(_ change: CommittedChange) -> Step {
        // The rows the change touched, as they were before it and are after it: what the delta
        // is made of, without comparing every row.
        var touched: [(id: String, before: BookRecord?, after: BookRecord?)] = []
        func touch(_ id: String, before: BookRecord?, after: BookRecord?) {
            if let index = touched.firstIndex(where: { $0.id == id }) {
                touched[index].after = after
            } else {
                touched.append((id, before, after))
            }
        }
        for case .book(let book, _, _, let deleted) in change.items {
            let old = members[book.id]
            let matches = !deleted && (readable?.contains(book.library) ?? true) && window.query.matches(book)
            guard old != nil || matches else { continue }
            let row = Row(book: book, key: sortKey(of: book))
            let inside = matches && followsStart(row)
            let full = rows.count == window.limit
            if let old {
                let index = insertionIndex(of: old)  // where it is: the first row not before it
                if inside && !precedes(old, row) && !precedes(row, old) {
                    rows[index] = row  // the same place in the order
                    setMember(book.id, row)
                    touch(book.id, before: old.book, after: book)
                    continue
                }
                rows.remove(at: index)
                // Past the last row of a full window, or out of it: a row beyond it may come first.
                let place = inside ? insertionIndex(of: row) : rows.count
                if full && place == rows.count && (!inside || precedes(old, row)) {
                    rows.insert(old, at: index)
                    undo(touched)
                    return .needsRead
                }
                touch(book.id, before: old.book, after: inside ? book : nil)
                if inside {
                    rows.insert(row, at: place)
                    setMember(book.id, row)
                } else {
                    setMember(book.id, nil)
                }
            } else if inside {
                if full, let last = rows.last, !precedes(row, last) { continue }
                rows.insert(row, at: insertionIndex(of: row))
                setMember(book.id, row)
                touch(book.id, before: nil, after: book)
                if rows.count > window.limit {
                    let last = rows.removeLast()
                    setMember(last.book.id, nil)
                    touch(last.book.id, before: last.book, after: nil)
                }
            }
        }
        if !touched.isEmpty { group?.rowsChanged() }
        var delta = ResourceDelta(id: "")
        delta.isCollection = true
        for (id, before, after) in touched {
            switch (before, after) {
            case (nil, let book?):
                delta.added.append(.init(id: id, fields: ResourceDelta.values(BookField.all) { book[$0] }))
            case (_?, nil):
                delta.removed.append(id)
            case (let previous?, let book?):
                if let changed = Self.changed(previous, book) { delta.changed.append(changed) }
            case (nil, nil):
                continue
            }
        }
        if delta.added.isEmpty && delta.removed.isEmpty && delta.changed.isEmpty { return .untouched }
        seq = max(seq, change.seq)
        return .changed(delta)
    }

    /// Puts back the rows `touched` changed, newest first.
    private func undo(_ touched: [(id: String, before: BookRecord?, after: BookRecord?)]) {
        for (id, before, after) in touched.reversed() {
            if after != nil, let row = members[id] {
                rows.remove(at: insertionIndex(of: row))
                setMember(id, nil)
            }
            if let before {
                let row = Row(book: before, key: sortKey(of: before))
                rows.insert(row, at: insertionIndex(of: row))
                setMember(id, row)
            }
        }
    }

    /// A member that stayed, with the fields that differ; nil when none does (same version).
    private static func changed(_ previous: BookRecord, _ book: BookRecord) -> LiveEvent.Member? {
        guard previous.version != book.version else { return nil }
        let fields = BookField.allCases.filter { $0 != .id && previous[$0] != book[$0] }
        return fields.isEmpty ? nil : .init(id: book.id, fields: ResourceDelta.values(Set(fields)) { book[$0] })
    }

    // MARK: The order

    private func sortKey(of book: BookRecord) -> FieldValue {
        Self.sortKey(of: book, in: window.query.order)
    }

    /// Where `book` goes in `order`: its field's `SortKey`, or in insertion order its `seq`.
    static func sortKey(of book: BookRecord, in order: ListOrder<BookField>?) -> FieldValue {
        guard let order else { return .int(book.seq) }
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

    /// What subscribers are told when the rows go from `old` to the current ones (after a read):
    /// the books that joined (every field), left, or changed (the fields that differ). Nil when
    /// nothing did.
    func delta(from old: [Row]) -> ResourceDelta? {
        var delta = ResourceDelta(id: "")
        delta.isCollection = true
        var before: [String: Int] = [:]
        before.reserveCapacity(old.count)
        for (index, row) in old.enumerated() { before[row.book.id] = index }
        for row in rows {
            let book = row.book
            guard let index = before.removeValue(forKey: book.id) else {
                delta.added.append(.init(id: book.id, fields: ResourceDelta.values(BookField.all) { book[$0] }))
                continue
            }
            if let changed = Self.changed(old[index].book, book) { delta.changed.append(changed) }
        }
        delta.removed = old.compactMap { before[$0.book.id] != nil ? $0.book.id : nil }
        return delta.added.isEmpty && delta.removed.isEmpty && delta.changed.isEmpty ? nil : delta
    }
}
