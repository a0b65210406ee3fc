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
    package var members: [Member]? { didSet { wire = WireForm() } }
    /// A library change's membership part, when not empty.
    package var membership: MembershipChange? { didSet { wire = WireForm() } }
    /// The encoded event, shared by every copy until one is changed: one change delivered to many
    /// subscribers of the same fields is encoded once, not once per subscriber.
    package private(set) var wire = WireForm()

    /// An event's encoded bytes, made by the first sink that sends it.
    ///
    /// `@unchecked Sendable`: events are delivered and sent on the `LiveActor` only.
    package final class WireForm: @unchecked Sendable {
        private var bytes: [UInt8]?

        init() {}

        package func bytes(encodingWith encode: () -> [UInt8]) -> [UInt8] {
            if let bytes { return bytes }
            let encoded = encode()
            bytes = encoded
            return encoded
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

    /// This pending change with a later one folded in: per field the latest value wins, and the
    /// id becomes the later one's. Membership folds so the result still moves the subscriber from
    /// what it last saw to the current state.
    func coalesced(with later: LiveEvent) -> LiveEvent {
        var result = self
        result.seq = later.seq
        result.libraryFields = Self.merge(libraryFields, later.libraryFields)
        result.bookFields = Self.merge(bookFields, later.bookFields)
        if let next = later.membership {
            var merged = membership ?? MembershipChange()
            for member in next.removed {
                if let index = merged.added.firstIndex(where: { $0.id == member }) {
                    merged.added.remove(at: index)  // never seen by the client: nothing to remove
                } else {
                    merged.removed.append(member)
                }
                merged.changed.removeAll { $0.id == member }
            }
            for member in next.added {
                if let index = merged.removed.firstIndex(of: member.id) {
                    merged.removed.remove(at: index)  // it left and came back: the client still has it
                    merged.changed.append(member)
                } else {
                    merged.added.append(member)
                }
            }
            for member in next.changed {
                if let index = merged.added.firstIndex(where: { $0.id == member.id }) {
                    merged.added[index].fields = Self.merge(merged.added[index].fields, member.fields)
                } else if let index = merged.changed.firstIndex(where: { $0.id == member.id }) {
                    merged.changed[index].fields = Self.merge(merged.changed[index].fields, member.fields)
                } else {
                    merged.changed.append(member)
                }
            }
            result.membership = merged
        }
        return result
    }

    private static func merge<Field: Equatable>(
        _ earlier: [(Field, FieldValue)],
        _ later: [(Field, FieldValue)]
    ) -> [(Field, FieldValue)] {
        var result = earlier
        for (field, value) in later {
            if let index = result.firstIndex(where: { $0.0 == field }) {
                result[index].1 = value
            } else {
                result.append((field, value))
            }
        }
        return result
    }
}

/// Where a subscriber's events go: the API layer's event stream.
package protocol LiveEventSink: Sendable {
    /// Whether the connection keeps up, so an event sent now does not pile up behind others.
    var isReady: Bool { get }
    func send(_ event: LiveEvent)
    /// Calls `callback` once the connection has sent what is queued (at once if it has).
    func whenReady(_ callback: @escaping @Sendable () -> Void)
    /// A comment line that keeps idle proxies from closing the stream.
    func keepAlive()
    /// Ends the stream.
    func finish()
}

/// What a subscriber watches and which fields it wants.
package struct SubscriptionRequest: Sendable {
    package enum Target: Sendable, Equatable {
        case book(String)
        case library(String)
    }

    package var target: Target
    /// For a library: its own fields. Ignored for a book.
    package var libraryFields: Set<LibraryField>
    /// For a book: its fields; for a library: the fields of each member (`books.<field>`).
    package var bookFields: Set<BookField>
    /// For a library: whether the subscriber wants the membership of `books`.
    package var members: Bool
    /// `Last-Event-ID`: replay what came after it instead of sending a snapshot.
    package var resumeAfter: Int?

    package init(
        target: Target,
        libraryFields: Set<LibraryField> = [],
        bookFields: Set<BookField> = [],
        members: Bool = false,
        resumeAfter: Int? = nil
    ) {
        self.target = target
        self.libraryFields = libraryFields
        self.bookFields = bookFields
        self.members = members
        self.resumeAfter = resumeAfter
    }
}
