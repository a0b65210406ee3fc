import LibraryDomain

/// What a subscriber watches and which fields it wants.
package struct SubscriptionRequest: Sendable {
    package typealias Target = LiveTarget

    /// What a subscriber sees, apart from where it resumes: subscribers of one resource with the
    /// same shape get the same events, built and encoded once for all of them.
    struct Shape: Hashable {
        var libraryFields: Set<LibraryField>
        var bookFields: Set<BookField>
        var members: Bool
        /// For a collection: the libraries whose items it may see (nil: every one). A resource's
        /// subscribers are checked when they join instead, so their events stay shared.
        var readable: Set<String>? = nil
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
    /// The libraries the subscriber may read (nil: every one). A library or book outside them is
    /// answered as one that does not exist; a collection carries only their items; a book moved
    /// out of them leaves its stream with a `delete`, and one moved into them joins a collection.
    package var readable: Set<String>?

    package init(
        target: Target,
        libraryFields: Set<LibraryField> = [],
        bookFields: Set<BookField> = [],
        members: Bool = false,
        resumeAfter: Int? = nil,
        readable: Set<String>? = nil
    ) {
        self.target = target
        self.libraryFields = libraryFields
        self.bookFields = bookFields
        self.members = members
        self.resumeAfter = resumeAfter
        self.readable = readable
    }

    var shape: Shape {
        Shape(
            libraryFields: libraryFields, bookFields: bookFields, members: members,
            readable: target.isCollection ? readable : nil)
    }

    /// Whether the library `id` (and its books) may be seen.
    func reads(_ id: String) -> Bool { readable?.contains(id) ?? true }

    /// This request asking for `other`'s fields too (same target).
    func widened(by other: SubscriptionRequest) -> SubscriptionRequest {
        var wide = self
        wide.libraryFields.formUnion(other.libraryFields)
        wide.bookFields.formUnion(other.bookFields)
        wide.members = members || other.members
        return wide
    }
}

/// Where a subscriber's events go: the API layer's event stream. Used on the live actor only.
@LiveActor
package protocol LiveEventSink: AnyObject {
    /// Whether the connection keeps up, so an event sent now does not pile up behind others.
    var isReady: Bool { get }
    func send(_ event: LiveEvent)
    /// Calls `callback` once the connection has sent what is queued (at once if it has).
    func whenReady(_ callback: @escaping @Sendable () -> Void)
    /// Sends one page of a collection's snapshot, then calls `next` once it can take another
    /// (the pace of the connection: only a page waits in memory).
    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void)
    /// The subscriber's first events (a snapshot, or what it missed) have all been sent: what it
    /// holds now is the state after change `seq`, and live changes follow.
    func settled(through seq: Int)
    /// A comment line that keeps idle proxies from closing the stream.
    func keepAlive()
    /// Ends the stream.
    func finish()
}

extension LiveEventSink {
    package func settled(through seq: Int) {}
}
