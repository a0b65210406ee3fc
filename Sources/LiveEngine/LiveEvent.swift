import Dispatch
import LibraryDomain

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
    /// million books is then two arrays, built and freed in one piece.
    package struct MemberTable: Sendable {
        /// The names of the fields each member carries, in representation order.
        package let fields: [String]
        package private(set) var ids: [String] = []
        /// `fields.count` values per member, member after member.
        package private(set) var values: [FieldValue] = []

        /// For a table of book fields, the fields (`fields` holds their names).
        private(set) var bookFields: [BookField] = []

        init(fields: [BookField], capacity: Int) {
            self.init(names: fields.map { $0.name }, capacity: capacity)
            bookFields = fields
        }

        init(names: [String], capacity: Int) {
            self.fields = names
            ids.reserveCapacity(capacity)
            values.reserveCapacity(capacity * names.count)
        }

        mutating func append(_ id: String, values row: some Sequence<FieldValue>) {
            ids.append(id)
            values.append(contentsOf: row)
        }

        package var count: Int { ids.count }

        /// The values of member `index`.
        package func values(of index: Int) -> ArraySlice<FieldValue> {
            values[index * fields.count..<(index + 1) * fields.count]
        }

        mutating func append(_ id: String, _ fields: [BookField], _ value: (BookField) -> FieldValue) {
            ids.append(id)
            for field in fields { values.append(value(field)) }
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
    package var members: MemberTable? { didSet { resetWire() } }
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

    /// An event's encoded bytes, made by the first sink that sends it.
    ///
    /// `@unchecked Sendable`: its state is used on the `LiveActor` only; `encodeElsewhere` runs
    /// the encoding itself on another thread, on a value, and comes back to the actor with it.
    package final class WireForm: @unchecked Sendable {
        private var bytes: [UInt8]?
        private var waiting: [@LiveActor ([UInt8]) -> Void]?

        init() {}

        package func bytes(encodingWith encode: () -> [UInt8]) -> [UInt8] {
            if let bytes { return bytes }
            let encoded = encode()
            bytes = encoded
            return encoded
        }

        /// Encodes off the live actor (a large snapshot would hold up every other subscriber),
        /// once however many sinks ask meanwhile, and calls `completion` on the actor.
        @LiveActor
        package func encodeElsewhere(
            _ encode: @escaping @Sendable () -> [UInt8],
            completion: @escaping @LiveActor ([UInt8]) -> Void
        ) {
            if let bytes { return completion(bytes) }
            if waiting != nil {
                waiting!.append(completion)
                return
            }
            waiting = [completion]
            DispatchQueue.global().async {
                let encoded = encode()
                LiveActor.enqueue {
                    self.bytes = encoded
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

    package var isEmptyChange: Bool {
        kind == .change && libraryFields.isEmpty && bookFields.isEmpty && (membership?.isEmpty ?? true)
    }
}
