import Dispatch
import LibraryDomain

/// One event for one subscriber, before it is encoded for the wire.
package struct LiveEvent: Sendable {
    package enum Kind: String, Sendable {
        case snapshot, change, delete
    }

    /// A book inside a library event: its id and the requested book fields.
    package struct Member: Sendable {
        package let id: String
        package var fields: [(BookField, FieldValue)]
    }

    /// A snapshot's members, as one flat table rather than a value per member: a snapshot of a
    /// million books is then two arrays, built and freed in one piece.
    package struct MemberTable: Sendable {
        /// The book fields each member carries, in representation order.
        package let fields: [BookField]
        package private(set) var ids: [String] = []
        /// `fields.count` values per member, member after member.
        package private(set) var values: [FieldValue] = []

        init(fields: [BookField], capacity: Int) {
            self.fields = fields
            ids.reserveCapacity(capacity)
            values.reserveCapacity(capacity * fields.count)
        }

        package var count: Int { ids.count }

        /// The values of member `index`.
        package func values(of index: Int) -> ArraySlice<FieldValue> {
            values[index * fields.count..<(index + 1) * fields.count]
        }

        mutating func append(_ id: String, _ value: (BookField) -> FieldValue) {
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

    package let kind: Kind
    /// The change this event reflects (for a snapshot: the latest change it includes).
    package var seq: Int { didSet { wire = WireForm() } }
    package let id: String
    /// The subscriber's fields that this event carries, in representation order.
    package var libraryFields: [(LibraryField, FieldValue)] = [] { didSet { wire = WireForm() } }
    package var bookFields: [(BookField, FieldValue)] = [] { didSet { wire = WireForm() } }
    /// A library snapshot's members, when the subscriber asked for `books`.
    package var members: MemberTable? { didSet { wire = WireForm() } }
    /// A library change's membership part, when not empty.
    package var membership: MembershipChange? { didSet { wire = WireForm() } }
    /// The encoded event, shared by every copy until one is changed: one change delivered to many
    /// subscribers of the same fields is encoded once, not once per subscriber.
    package private(set) var wire = WireForm()

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

    package init(kind: Kind, seq: Int, id: String) {
        self.kind = kind
        self.seq = seq
        self.id = id
    }

    var isEmptyChange: Bool {
        kind == .change && libraryFields.isEmpty && bookFields.isEmpty && (membership?.isEmpty ?? true)
    }
}
