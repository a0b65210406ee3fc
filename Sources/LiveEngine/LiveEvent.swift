import Dispatch
import LibraryDomain
import Synchronization

/// One event for one subscriber, before it is encoded for the wire.
package struct LiveEvent: Sendable {
    package enum Kind: String, Sendable {
        case snapshot, change, delete
    }

    /// An item inside a library's `books` or a collection: its id and the requested fields (book
    /// fields for a book, library fields for a library in `/libraries/events`).
    package struct Member: Sendable {
        package let id: String
        package var fields: [(BookField, FieldValue)]
        package var libraryFields: [(LibraryField, FieldValue)] = []

        init(id: String, fields: [(BookField, FieldValue)]) {
            self.id = id
            self.fields = fields
        }

        init(id: String, libraryFields: [(LibraryField, FieldValue)]) {
            self.id = id
            self.fields = []
            self.libraryFields = libraryFields
        }

        var isEmpty: Bool { fields.isEmpty && libraryFields.isEmpty }
    }

    /// A snapshot's members, as one flat table rather than a value per member: a snapshot of a
    /// million books is then a few arrays, built and freed in one piece.
    package struct MemberTable: Sendable {
        /// The fields each member carries (its columns), in representation order.
        enum Columns: Sendable {
            case books([BookField])
            case libraries([LibraryField])
        }

        let columns: Columns
        /// The columns' names, in the same order (what the encoder writes).
        package let fields: [String]
        package private(set) var ids: [String] = []
        /// `fields.count` values per member, member after member.
        package private(set) var values: [FieldValue] = []
        /// A library's members' insertion orders (`LiveBook.order`), member after member, which a
        /// kept snapshot's refresh places joining members by (`applying(_:orders:)`); empty
        /// in a collection's page.
        private(set) var orders: [Int] = []

        init(_ columns: Columns, capacity: Int) {
            self.columns = columns
            switch columns {
            case .books(let fields): self.fields = fields.map(\.name)
            case .libraries(let fields): self.fields = fields.map(\.name)
            }
            ids.reserveCapacity(capacity)
            values.reserveCapacity(capacity * fields.count)
        }

        package var count: Int { ids.count }

        /// Makes room for `count` members in all, with their insertion orders (a library's).
        mutating func reserveCapacity(_ count: Int) {
            ids.reserveCapacity(count)
            orders.reserveCapacity(count)
            values.reserveCapacity(count * fields.count)
        }

        /// The values of member `index`.
        package func values(of index: Int) -> ArraySlice<FieldValue> {
            values[index * fields.count..<(index + 1) * fields.count]
        }

        /// Appends books, a row each: the id, the insertion order (for a library's members) and
        /// the value of each column.
        mutating func append<Member>(
            books members: some Sequence<Member>,
            id: (Member) -> String,
            order: ((Member) -> Int)? = nil,
            _ value: (Member, BookField) -> FieldValue
        ) {
            guard case .books(let columns) = columns else { preconditionFailure("a table of libraries") }
            for member in members {
                ids.append(id(member))
                if let order { orders.append(order(member)) }
                for field in columns { values.append(value(member, field)) }
            }
        }

        /// Appends one book with its insertion order (a library's member): `value` gives each
        /// column's value. One row at a time, so that a load reads each field of a record it owns
        /// in place, not of a copy.
        mutating func append(book id: String, order: Int, _ value: (BookField) -> FieldValue) {
            guard case .books(let columns) = columns else { preconditionFailure("a table of libraries") }
            ids.append(id)
            orders.append(order)
            for field in columns { values.append(value(field)) }
        }

        /// Appends libraries (a collection's page), a row each: the id and each column's value.
        mutating func append<Member>(
            libraries members: some Sequence<Member>, id: (Member) -> String,
            _ value: (Member, LibraryField) -> FieldValue
        ) {
            guard case .libraries(let columns) = columns else { preconditionFailure("a table of books") }
            for member in members {
                ids.append(id(member))
                for field in columns { values.append(value(member, field)) }
            }
        }

        /// A library's members after `change`: the changed ones with their new values, the
        /// removed ones gone, and the added ones in their places, by insertion order (`order`
        /// gives a changed or added member's). Runs off the live actor. When the membership stays,
        /// the ids and orders are shared with this table and only the values are copied, the
        /// changed rows found by their order; else one pass over the table.
        func applying(_ change: MembershipChange, orders order: (String) -> Int) -> MemberTable {
            guard case .books(let columns) = columns else { preconditionFailure("a table of libraries") }
            precondition(orders.count == ids.count, "a library's table has its members' orders")
            var column = [Int?](repeating: nil, count: BookField.allCases.count)
            for (index, field) in columns.enumerated() { column[field.rawValue] = index }
            let width = fields.count
            /// Writes `updates` over the row that starts at `start` of `values`.
            func patch(_ values: inout [FieldValue], at start: Int, with updates: [(BookField, FieldValue)]) {
                for (field, value) in updates {
                    if let index = column[field.rawValue] { values[start + index] = value }
                }
            }

            if change.added.isEmpty && change.removed.isEmpty {
                var next = self
                for member in change.changed {
                    guard let index = position(of: member.id, order: order(member.id)) else { continue }
                    patch(&next.values, at: index * width, with: member.fields)
                }
                return next
            }

            // The membership moved (rarer): one pass, the changed and removed found by id.
            var changed: [String: [(BookField, FieldValue)]] = [:]
            for member in change.changed { changed[member.id, default: []] += member.fields }
            let removed = Set(change.removed)
            let added = change.added.map { (order($0.id), $0) }.sorted { $0.0 < $1.0 }
            var next = MemberTable(self.columns, capacity: count - removed.count + added.count)
            var nextAdded = 0
            func appendAdded(before limit: Int) {
                while nextAdded < added.count, added[nextAdded].0 < limit {
                    let (order, member) = added[nextAdded]
                    next.ids.append(member.id)
                    next.orders.append(order)
                    let start = next.values.count
                    next.values.append(contentsOf: repeatElement(FieldValue.null, count: width))
                    patch(&next.values, at: start, with: member.fields)
                    nextAdded += 1
                }
            }
            for index in ids.indices {
                appendAdded(before: orders[index])
                let id = ids[index]
                if removed.contains(id) { continue }
                next.ids.append(id)
                next.orders.append(orders[index])
                let start = next.values.count
                next.values.append(contentsOf: values(of: index))
                if let updates = changed[id] { patch(&next.values, at: start, with: updates) }
            }
            appendAdded(before: .max)
            return next
        }

        /// Where member `id`, of insertion order `order`, is: found by its order (the table is in
        /// insertion order), or by its id should orders repeat (rows logged before they were kept).
        private func position(of id: String, order: Int) -> Int? {
            var (low, high) = (0, orders.count)
            while low < high {
                let middle = (low + high) / 2
                if orders[middle] < order { low = middle + 1 } else { high = middle }
            }
            if low < ids.count, orders[low] == order, ids[low] == id { return low }
            return ids.firstIndex(of: id)
        }
    }

    /// What happened to a library's books since the subscriber's last event.
    package struct MembershipChange: Sendable {
        package var added: [Member] = []
        package var removed: [String] = []
        package var changed: [Member] = []

        package var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }
    }

    /// Where a page of a collection's snapshot falls: a snapshot of any size is sent as pages,
    /// the first opening its `items`, the last closing them and carrying the event's id.
    package struct PagePosition: Sendable {
        package var isFirst: Bool
        package var isLast: Bool
    }

    package let kind: Kind
    /// Whether the event is a collection's (`/libraries/events`, `/books/events`): a snapshot has
    /// `items`, a change has `added`, `removed` and `changed` at the top level and no `id`.
    package let isCollection: Bool
    /// For a page of a collection's snapshot: which page (its items are `members`).
    package var page: PagePosition?
    /// For a change made of several folded on the way to the live side: the first of them.
    var foldedFrom: Int?
    /// The change this event reflects (for a snapshot: the latest change it includes).
    package var seq: Int { didSet { resetWire() } }
    package let id: String
    /// The subscriber's fields that this event carries, in representation order.
    package var libraryFields: [(LibraryField, FieldValue)] = [] { didSet { resetWire() } }
    package var bookFields: [(BookField, FieldValue)] = [] { didSet { resetWire() } }
    /// A library snapshot's members, when the subscriber asked for `books`.
    package var members: MemberTable? {
        didSet {
            resetWire()
            encodedMembers = nil
        }
    }
    /// `members`' rows as the hub's row encoder wrote them while a load read them
    /// (`LiveHub.Wire`), for the event's first encoding, which takes them as they are;
    /// a later one (the other wire form) writes the table. Nil once `members` changes.
    package internal(set) var encodedMembers: EncodedRows?

    /// Rows encoded ahead, shared by the copies of an event and taken once: a million members'
    /// are 70 MB, not to be kept beside the encoded event and the table.
    package final class EncodedRows: Sendable {
        private let rows: Mutex<[UInt8]?>

        init(_ rows: [UInt8]) { self.rows = Mutex(rows) }

        /// The rows, to the first who asks (from any thread); nil afterwards.
        package func take() -> [UInt8]? {
            rows.withLock { rows in
                defer { rows = nil }
                return rows
            }
        }
    }
    /// A library change's membership part, when not empty.
    package var membership: MembershipChange? { didSet { resetWire() } }
    /// The encoded event, shared by every copy until one is changed: one change delivered to many
    /// subscribers of the same fields is encoded once, not once per subscriber.
    package private(set) var wire = WireForm()
    /// The encoded data alone (what a `/events` frame's entry carries), shared the same way.
    package private(set) var dataWire = WireForm()

    private mutating func resetWire() {
        wire = WireForm()
        dataWire = WireForm()
    }

    /// An event's encoded bytes, made by the first sink that sends it: one array, or for a large
    /// event encoded off the actor, pieces written one after another (a snapshot whose rows were
    /// encoded ahead is its head, those rows as they are, and its end: 70 MB not copied again).
    ///
    /// `@unchecked Sendable`: its state is used on the `LiveActor` only; `encodeElsewhere` runs
    /// the encoding itself on another thread, on a value, and comes back to the actor with it.
    package final class WireForm: @unchecked Sendable {
        private var pieces: [[UInt8]]?
        private var waiting: [@LiveActor ([[UInt8]]) -> Void]?

        init() {}

        /// The bytes in one array (joined, should they have been encoded in pieces).
        package func bytes(encodingWith encode: () -> [UInt8]) -> [UInt8] {
            if let pieces { return pieces.count == 1 ? pieces[0] : Array(pieces.joined()) }
            let encoded = encode()
            pieces = [encoded]
            return encoded
        }

        /// Encodes off the live actor (a large snapshot would hold up every other subscriber),
        /// once however many sinks ask meanwhile, and calls `completion` on the actor.
        @LiveActor
        package func encodeElsewhere(
            _ encode: @escaping @Sendable () -> [[UInt8]],
            completion: @escaping @LiveActor ([[UInt8]]) -> Void
        ) {
            if let pieces { return completion(pieces) }
            if waiting != nil {
                waiting!.append(completion)
                return
            }
            waiting = [completion]
            DispatchQueue.global().async {
                let encoded = encode()
                LiveActor.enqueue {
                    self.pieces = encoded
                    let callbacks = self.waiting ?? []
                    self.waiting = nil
                    callbacks.forEach { $0(encoded) }
                }
            }
        }
    }

    package init(kind: Kind, seq: Int, id: String, isCollection: Bool = false) {
        self.kind = kind
        self.seq = seq
        self.id = id
        self.isCollection = isCollection
    }

    /// The members it carries: a snapshot's table, or a change's added, removed and changed (a
    /// catch-up can carry tens of thousands).
    package var memberCount: Int {
        (members?.count ?? 0) + (membership.map { $0.added.count + $0.removed.count + $0.changed.count } ?? 0)
    }

    package var isEmptyChange: Bool {
        kind == .change && libraryFields.isEmpty && bookFields.isEmpty && (membership?.isEmpty ?? true)
    }
}
