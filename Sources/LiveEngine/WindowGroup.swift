import LibraryDomain

/// The open windows of one list (one query, for one set of readable libraries): the pages of a
/// library's books by title, say. A change is checked against the group once, not window by
/// window, so that a write that can enter or leave none of them costs a lookup and a binary search
/// however many are open:
/// - a book held by a window is found by a count per id;
/// - a book that may enter one must sort after a window's start and before its end (its last row,
///   or anywhere when it is not full): with the windows ordered by start, and the furthest end of
///   each prefix kept, one binary search tells whether any window can take it.
@LiveActor
final class WindowGroup {
    struct Key: Hashable {
        let query: BookQuery
        let readable: Set<String>?
    }

    /// A place in the list's order: a sort key and an id (in insertion order, the `seq` as key).
    struct Position {
        let key: FieldValue
        let id: String
    }

    let key: Key
    /// Ordered by start.
    private(set) var windows: [LiveWindow] = []
    /// How many windows hold each book.
    private var holders: [String: Int] = [:]
    /// For each prefix of `windows`, the furthest end among them (nil: unbounded); nil when it
    /// must be made again (a window's rows changed).
    private var reach: [Position?]?
    /// Windows being read: they take every change of the list meanwhile.
    private var reading = 0

    init(_ key: Key) {
        self.key = key
    }

    var isEmpty: Bool { windows.isEmpty }

    func add(_ window: LiveWindow) {
        let index = windows.partitioningIndex { !startsBefore($0, window.start) }
        windows.insert(window, at: index)
        window.group = self
        reach = nil
    }

    func remove(_ window: LiveWindow) {
        guard let index = windows.firstIndex(where: { $0 === window }) else { return }
        windows.remove(at: index)
        for id in window.memberIDs { left(id) }
        if window.isReading { reading -= 1 }
        window.group = nil
        reach = nil
    }

    func joined(_ id: String) { holders[id, default: 0] += 1 }

    func left(_ id: String) {
        guard let count = holders[id] else { return }
        holders[id] = count == 1 ? nil : count - 1
    }

    /// A window's rows changed: the ends are made again at the next change.
    func rowsChanged() { reach = nil }

    func readStarted() { reading += 1 }
    func readEnded() { reading -= 1 }

    /// The windows `change` may concern: all of them when one holds one of its books, else those
    /// one of its books may enter, and those being read.
    func windows(concernedBy change: CommittedChange) -> [LiveWindow] {
        var found: [LiveWindow] = []
        for case .book(let book, _, _, let deleted) in change.items {
            if holders[book.id] != nil { return windows }
            guard !deleted, key.readable?.contains(book.library) ?? true, key.query.matches(book) else { continue }
            let position = Position(key: LiveWindow.sortKey(of: book, in: key.query.order), id: book.id)
            collect(mayEnter: position, into: &found)
        }
        if reading > 0 { found += windows.filter(\.isReading) }
        guard found.count > 1 else { return found }
        var seen: Set<ObjectIdentifier> = []
        return found.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    private func collect(mayEnter position: Position, into found: inout [LiveWindow]) {
        let reach = self.reach ?? makeReach()
        // The windows that start before the position, then whether any of them reaches past it.
        let starting = windows.partitioningIndex { !startsBefore($0, position) }
        guard starting > 0, endsAfter(reach[starting - 1], position) else { return }
        for window in windows[..<starting] where endsAfter(window.end, position) { found.append(window) }
    }

    private func makeReach() -> [Position?] {
        var made: [Position?] = []
        made.reserveCapacity(windows.count)
        var furthest: Position?? = .none  // none yet
        for window in windows {
            let end = window.end
            switch furthest {
            case .none: furthest = .some(end)
            case .some(nil): break  // unbounded already
            case .some(let current?): if end == nil || before(current, end!) { furthest = .some(end) }
            }
            made.append(furthest!)
        }
        reach = made
        return made
    }

    // MARK: The order

    private func before(_ a: Position, _ b: Position) -> Bool {
        guard let order = key.query.order else { return SortKey.compare(a.key, b.key) < 0 }
        return order.precedes(a.key, a.id, b.key, b.id)
    }

    /// Whether `window` starts before `position` (a window from the top starts before every one).
    private func startsBefore(_ window: LiveWindow, _ position: Position?) -> Bool {
        guard let start = window.start else { return position != nil }
        guard let position else { return false }
        return before(start, position)
    }

    /// Whether an end (nil: unbounded) lies after `position`.
    private func endsAfter(_ end: Position?, _ position: Position) -> Bool {
        guard let end else { return true }
        return before(position, end)
    }
}

extension Array {
    /// The index of the first element for which `belongs` holds, in an array where every element
    /// for which it holds follows every one for which it does not.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
