/// Opening and closing subscriptions: snapshots, replays from the change log, and dropping models
/// nobody watches any more.
extension LiveHub {
    /// What became of a subscription request.
    package enum Outcome: Sendable {
        /// The stream is open; its first events are on their way.
        case subscribed
        /// No such library or book.
        case notFound
        /// The database could not be read.
        case failed(StoreError)
    }

    /// Subscribes to a library or book. `open` is called (on this actor) once the resource is known
    /// to exist, to open the stream and give the sink its events go to.
    package func subscribe(
        _ request: SubscriptionRequest,
        open: @escaping @LiveActor (_ subscriberID: Int) -> any LiveEventSink,
        outcome: @escaping @Sendable (Outcome) -> Void
    ) {
        switch request.target {
        case .book(let id):
            if let book = books[id] {
                attach(request, to: .book(book), stateSeq: appliedSeq, open: open, outcome: outcome)
                return
            }
            store.read({ reader in
                (try reader.book(id: id).map { (LoadedRecord.book($0), [BookRecord]()) }, try reader.latestSeq())
            }) { result in
                LiveActor.enqueue { self.loaded(request, result, open, outcome) }
            }
        case .library(let id):
            if let library = libraries[id] {
                attach(request, to: .library(library), stateSeq: appliedSeq, open: open, outcome: outcome)
                return
            }
            store.read({ reader in
                let library = try reader.library(id: id)
                let members = library == nil ? [] : try reader.allBooks(inLibrary: id)
                return (library.map { (LoadedRecord.library($0), members) }, try reader.latestSeq())
            }) { result in
                LiveActor.enqueue { self.loaded(request, result, open, outcome) }
            }
        }
    }

    enum LoadedRecord: Sendable {
        case book(BookRecord)
        case library(LibraryRecord)
    }

    private enum Model {
        case book(LiveBook)
        case library(LiveLibrary)
    }

    private func loaded(
        _ request: SubscriptionRequest,
        _ result: Result<((LoadedRecord, [BookRecord])?, Int), StoreError>,
        _ open: @escaping @LiveActor (Int) -> any LiveEventSink,
        _ outcome: @escaping @Sendable (Outcome) -> Void
    ) {
        switch result {
        case .failure(let error):
            outcome(.failed(error))
        case .success((nil, _)):
            outcome(.notFound)
        case .success((.some, let seq)) where seq < appliedSeq:
            subscribe(request, open: open, outcome: outcome)  // read before changes already applied: read again
        case .success((let (record, members)?, let seq)):
            switch record {
            case .book(let book):
                let live = books[book.id] ?? LiveBook(book)
                books[book.id] = live
                attach(request, to: .book(live), stateSeq: seq, open: open, outcome: outcome)
            case .library(let library):
                let live =
                    libraries[library.id]
                    ?? LiveLibrary(library, books: members.map { books[$0.id] ?? LiveBook($0) })
                libraries[library.id] = live
                for member in live.books { books[member.id] = member }
                attach(request, to: .library(live), stateSeq: seq, open: open, outcome: outcome)
            }
        }
    }

    private func attach(
        _ request: SubscriptionRequest,
        to model: Model,
        stateSeq: Int,
        open: @LiveActor (Int) -> any LiveEventSink,
        outcome: @Sendable (Outcome) -> Void
    ) {
        let id = nextSubscriberID
        nextSubscriberID += 1
        let subscriber = Subscriber(id: id, request: request, sink: open(id))
        counters.subscribers.add(1, ordering: .relaxed)
        outcome(.subscribed)
        switch model {
        case .book(let book):
            book.subscribers[id] = subscriber
            for field in request.bookFields { bookFieldDemand[book.id, default: [:]][field, default: 0] += 1 }
            track(book)
        case .library(let library):
            library.subscribers[id] = subscriber
            var demand = libraryDemand[library.id, default: Demand()]
            for field in request.libraryFields { demand.fields[field, default: 0] += 1 }
            if request.members {
                demand.members += 1
                // While nobody watched `books`, joins and departures were not published; the
                // snapshot this subscriber gets is the baseline its deltas must start from.
                library.publishedMembers = Set(library.books.map(\.id))
            }
            for field in request.bookFields where request.members { demand.memberFields[field, default: 0] += 1 }
            libraryDemand[library.id] = demand
            track(library)
            if !request.bookFields.isEmpty && request.members { library.books.forEach { track($0) } }
        }
        let latest = max(stateSeq, appliedSeq)
        guard let after = request.resumeAfter, after <= latest, after >= latest - store.history else {
            subscriber.deliver(snapshot(model, request, seq: latest))
            return
        }
        guard after < latest else { return }  // nothing was missed
        subscriber.held = []
        let target = request.target
        store.read({ reader -> [CommittedChange]? in
            guard try reader.oldestKeptSeq() <= after + 1 else { return nil }
            switch target {
            case .book(let id): return try reader.changes(ofBook: id, after: after, through: latest)
            case .library(let id): return try reader.changes(ofLibrary: id, after: after, through: latest)
            }
        }) { result in
            LiveActor.enqueue { self.replay(result, to: subscriber, model: model) }
        }
    }

    private func replay(_ result: Result<[CommittedChange]?, StoreError>, to subscriber: Subscriber, model: Model) {
        guard case .success(let changes?) = result else {
            // The history no longer reaches back far enough (or could not be read): start afresh.
            subscriber.held = nil
            subscriber.deliver(snapshot(model, subscriber.request, seq: appliedSeq))
            return
        }
        let held = subscriber.held ?? []
        subscriber.held = nil
        for change in changes {
            subscriber.deliver(Self.event(for: change, subscriber.request), coalescing: false)
        }
        for event in held { subscriber.deliver(event) }
    }

    /// The event a logged change makes for a subscriber (an empty change when none of its fields moved).
    static func event(for change: CommittedChange, _ request: SubscriptionRequest) -> LiveEvent {
        switch request.target {
        case .book(let id):
            var event = LiveEvent(kind: .change, seq: change.seq, id: id)
            for case .book(let book, let fields, _, let deleted) in change.items where book.id == id {
                if deleted { return LiveEvent(kind: .delete, seq: change.seq, id: id) }
                event.bookFields = BookField.allCases.filter {
                    $0 != .id && fields.contains($0) && request.bookFields.contains($0)
                }.map { ($0, book.value(of: $0)) }
            }
            return event
        case .library(let id):
            var event = LiveEvent(kind: .change, seq: change.seq, id: id)
            var membership = LiveEvent.MembershipChange()
            for item in change.items {
                switch item {
                case .library(let library, let fields, let deleted) where library.id == id:
                    if deleted { return LiveEvent(kind: .delete, seq: change.seq, id: id) }
                    event.libraryFields = LibraryField.allCases.filter {
                        $0 != .id && fields.contains($0) && request.libraryFields.contains($0)
                    }.map { ($0, library.value(of: $0)) }
                case .book(let book, let fields, let previous, let deleted) where request.members:
                    let was = previous == id
                    let isMember = !deleted && book.libraryId == id
                    let requested = BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }
                    if isMember && !was {
                        membership.added.append(.init(id: book.id, fields: requested.map { ($0, book.value(of: $0)) }))
                    } else if was && !isMember {
                        membership.removed.append(book.id)
                    } else if was && isMember {
                        let changed = requested.filter { fields.contains($0) }
                        if !changed.isEmpty {
                            membership.changed.append(
                                .init(id: book.id, fields: changed.map { ($0, book.value(of: $0)) }))
                        }
                    }
                default:
                    break
                }
            }
            if !membership.isEmpty { event.membership = membership }
            return event
        }
    }

    private func snapshot(_ model: Model, _ request: SubscriptionRequest, seq: Int) -> LiveEvent {
        switch model {
        case .book(let book):
            var event = LiveEvent(kind: .snapshot, seq: seq, id: book.id)
            event.bookFields = BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }
                .map { ($0, book.value(of: $0)) }
            return event
        case .library(let library):
            var event = LiveEvent(kind: .snapshot, seq: seq, id: library.id)
            event.libraryFields = LibraryField.allCases.filter { $0 != .id && request.libraryFields.contains($0) }
                .map { ($0, library.value(of: $0)) }
            if request.members {
                let fields = BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }
                event.members = library.books.map { book in
                    LiveEvent.Member(id: book.id, fields: fields.map { ($0, book.value(of: $0)) })
                }
            }
            return event
        }
    }

    /// Forgets a subscriber whose stream ended, and the models nobody watches any more.
    package func unsubscribe(_ id: Int, from target: SubscriptionRequest.Target) {
        switch target {
        case .book(let bookID):
            guard let book = books[bookID], let subscriber = book.subscribers.removeValue(forKey: id) else { return }
            counters.subscribers.subtract(1, ordering: .relaxed)
            counters.coalesced.add(subscriber.coalesced, ordering: .relaxed)
            for field in subscriber.request.bookFields { bookFieldDemand[bookID]?[field]? -= 1 }
            bookFieldDemand[bookID] = bookFieldDemand[bookID]?.filter { $0.value > 0 }
            if book.subscribers.isEmpty && libraries[book.libraryId] == nil {
                books[bookID] = nil
                bookFieldDemand[bookID] = nil
            }
        case .library(let libraryID):
            guard let library = libraries[libraryID], let subscriber = library.subscribers.removeValue(forKey: id)
            else {
                return
            }
            counters.subscribers.subtract(1, ordering: .relaxed)
            counters.coalesced.add(subscriber.coalesced, ordering: .relaxed)
            let request = subscriber.request
            var demand = libraryDemand[libraryID, default: Demand()]
            for field in request.libraryFields { demand.fields[field]? -= 1 }
            if request.members { demand.members -= 1 }
            for field in request.bookFields where request.members { demand.memberFields[field]? -= 1 }
            demand.fields = demand.fields.filter { $0.value > 0 }
            demand.memberFields = demand.memberFields.filter { $0.value > 0 }
            libraryDemand[libraryID] = demand
            if library.subscribers.isEmpty { drop(library) }
        }
    }

    /// Stops watching a library: its members go too unless somebody watches them directly.
    func drop(_ library: LiveLibrary) {
        libraries[library.id] = nil
        libraryDemand[library.id] = nil
        for book in library.books where book.subscribers.isEmpty {
            books[book.id] = nil
            bookFieldDemand[book.id] = nil
        }
    }

    /// Ends every stream (server shutdown).
    package func finishAll() {
        for library in libraries.values { library.subscribers.values.forEach { $0.finish() } }
        for book in books.values { book.subscribers.values.forEach { $0.finish() } }
    }
}
