import Dispatch
import LibraryDomain

/// Opening and closing subscriptions: loading a resource once for all its first subscribers,
/// snapshots, replays from the change log, and dropping models nobody watches any more.
extension LiveHub {
    /// What became of a subscription request.
    package enum Outcome: Sendable {
        /// The stream is open; its first events are on their way.
        case subscribed
        /// No such library or book.
        case notFound
        /// No such library or book, and the change log no longer reaches back to the id the
        /// subscriber resumes from: whether it existed then cannot be told.
        case deletedBeyondHistory
        /// No such library or book, and the kept log shows no deletion of it at or before the id
        /// the subscriber resumes from: it never existed, or went before the kept history. (With
        /// a logged deletion at or before the id the outcome is `.notFound`: the subscriber got
        /// that `delete`.) Also the answer for a library or book the subscriber may not read,
        /// whatever the log holds: it learns nothing of it.
        case absentWithoutTrace
        /// The database could not be read.
        case failed(StoreError)
    }

    /// A subscription request waiting for its resource to load.
    struct Waiter {
        let request: SubscriptionRequest
        let open: @LiveActor (_ subscriberID: Int) -> any LiveEventSink
        let outcome: @Sendable (Outcome) -> Void
    }

    /// A resource being read for its first subscribers. The changes that concern it while the read
    /// runs are kept (folded per resource): those the read did not see are applied to the model
    /// before anybody is attached, so the model starts exactly at the live side's state.
    @LiveActor final class PendingLoad {
        var waiters: [Waiter] = []
        var changes: [String: (seq: Int, item: ChangeItem)] = [:]
        /// A library's members as they are read.
        var members: LoadedMembers?

        func note(_ item: ChangeItem, seq: Int) {
            members?.noteChange(seq: seq)
            let earlier = changes[item.key]?.item
            changes[item.key] = (seq, earlier.map { $0.merged(with: item) } ?? item)
        }
    }

    enum Model {
        case book(LiveBook)
        case library(LiveLibrary)

        @LiveActor var baseSeq: Int {
            switch self {
            case .book(let book): book.baseSeq
            case .library(let library): library.baseSeq
            }
        }
    }

    /// Subscribes to a library or book. `open` is called (on this actor) once the resource is known
    /// to exist, to open the stream and give the sink its events go to.
    package func subscribe(
        _ request: SubscriptionRequest,
        open: @escaping @LiveActor (_ subscriberID: Int) -> any LiveEventSink,
        outcome: @escaping @Sendable (Outcome) -> Void
    ) {
        let waiter = Waiter(request: request, open: open, outcome: outcome)
        let target = request.target
        if case .library(let id) = target, !request.reads(id) {
            // As if it did not exist, decided by the rights alone: nothing is read for it.
            return outcome(.absentWithoutTrace)
        }
        if case .window(let window) = target {
            subscribe(waiter, toWindow: window)
        } else if target.isCollection {
            subscribe(toCollection: waiter)
        } else if let model = model(for: target) {
            attach(waiter, to: model)
        } else if let load = loads[target] {
            load.waiters.append(waiter)
        } else {
            let load = PendingLoad()
            load.waiters = [waiter]
            loads[target] = load
            updateInbox()  // before the read starts, so no commit it misses skips the live side
            // The models are made on a queue of their own as the members are read, not on the
            // reader's (with `:memory:` that is the writer's, whose commits would wait).
            let members = LoadedMembers(
                snapshotOf: request.resumeAfter == nil ? request.shape : nil,
                encodingRows: rowEncoder, largeLoads: largeLoads)
            load.members = members
            store.load(target, members: { seq, expected, batch in members.add(&batch, seq: seq, expected: expected) }) {
                result in
                members.finish(result) {
                    LiveActor.enqueue { self.loaded(target, result, members: members) }
                }
            }
        }
    }

    private func model(for target: LiveTarget) -> Model? {
        switch target {
        case .book(let id): books[id].map(Model.book)
        case .library(let id): libraries[id].map(Model.library)
        case .libraries, .books, .window: nil
        }
    }

    func noteForLoads(_ item: ChangeItem, seq: Int) {
        switch item {
        case .book(let book, _, let before, _):
            loads[.book(book.id)]?.note(item, seq: seq)
            loads[.library(book.library)]?.note(item, seq: seq)
            if let previous = before?.library, previous != book.library {
                loads[.library(previous)]?.note(item, seq: seq)
            }
        case .library(let library, _, _):
            loads[.library(library.id)]?.note(item, seq: seq)
        }
    }

    private func loaded(_ target: LiveTarget, _ result: Result<LoadedState, StoreError>, members: LoadedMembers) {
        // A read ahead of the live side (a replica's database answers before its feed does) is
        // taken once the live side has caught up with it: a model already live that the new one
        // shares (a member watched on its own) is then at least as new as the read, and no change
        // the read saw reaches the new subscribers after their snapshot, with its id again.
        if case .success(let state) = result, state.seq > appliedSeq {
            return intake.whenApplied(through: state.seq) { self.loaded(target, result, members: members) }
        }
        defer { members.endLargeLoad() }  // once its models are attached
        guard let load = loads.removeValue(forKey: target) else { return }
        defer { updateInbox() }
        let state: LoadedState
        switch result {
        case .failure(let error):
            load.waiters.forEach { $0.outcome(.failed(error)) }
            return
        case .success(let loaded):
            state = loaded
        }
        // Changes after the read, already applied to the other models, in the order they came.
        let later = load.changes.values.filter { $0.seq > state.seq }.sorted { $0.seq < $1.seq }
        let model: Model?
        switch state.resource {
        case nil:
            model = nil
        case .book(let record):
            model = book(record, at: state.seq, catchingUp: later)
        case .library(let record, _):
            model = library(record, members: members, at: state.seq, catchingUp: later)
        }
        guard let model else {
            load.waiters.forEach(notFound)
            return
        }
        for waiter in load.waiters { attach(waiter, to: model) }
        // A book whose waiters may none of them read it is not kept.
        if case .book(let id) = target, audiences[target] == nil { books[id] = nil }
    }

    /// The model of a loaded book, brought up to the live side's state (nil if deleted since).
    private func book(_ record: BookRecord, at seq: Int, catchingUp later: [(seq: Int, item: ChangeItem)]) -> Model? {
        if let existing = books[record.id] { return .book(existing) }
        // A member of a watched library has its model already, in the library it is in now.
        var library = record.library
        for case (_, .book(let latest, _, _, _)) in later where latest.id == record.id { library = latest.library }
        if let member = libraries[library]?.members[record.id] {
            books[record.id] = member
            return .book(member)
        }
        let book = LiveBook(record, seq: seq)
        for case (_, .book(let latest, let fields, _, let deleted)) in later where latest.id == record.id {
            if deleted { return nil }
            book.update(latest, fields: fields)
        }
        books[record.id] = book
        return .book(book)
    }

    /// The model of a loaded library and its members, brought up to the live side's state (nil if
    /// deleted since).
    private func library(
        _ record: LibraryRecord,
        members loaded: LoadedMembers,
        at seq: Int,
        catchingUp later: [(seq: Int, item: ChangeItem)]
    ) -> Model? {
        if let existing = libraries[record.id] { return .library(existing) }
        // A member already live (watched itself, in `books`) keeps its model, which is up to date;
        // the others are fresh, as read, so the changes since the read apply to them. The live
        // ones are found from the smaller side.
        let first = loaded.snapshot
        var (ordered, byID) = loaded.take()
        let live: [LiveBook] =
            books.count < byID.count
            ? books.values.filter { byID[$0.id] != nil }
            : byID.keys.compactMap { books[$0] }
        if !live.isEmpty {
            for model in live { byID[model.id] = model }
            ordered = ordered.map { byID[$0.id]! }
        }
        // The first subscriber's snapshot, made from the records read, is exact when nothing
        // changed in the library since the read and no member was live already (a live model can
        // be ahead of the read, or behind it).
        let library = LiveLibrary(record, members: byID, ordered: ordered, seq: seq)
        if later.isEmpty, live.isEmpty, let (shape, event) = first { library.snapshots.keep(event, for: shape) }
        for (_, item) in later {
            switch item {
            case .library(let latest, let fields, let deleted):
                if deleted { return nil }
                library.update(latest, fields: fields)
            case .book(let book, let fields, _, let deleted):
                if deleted || book.library != library.id {
                    library.remove(book.id)
                } else if let member = library.members[book.id] {
                    if books[book.id] == nil { member.update(book, fields: fields) }
                } else {
                    library.add(books[book.id] ?? LiveBook(book, seq: seq))
                }
            }
        }
        libraries[record.id] = library
        return .library(library)
    }

    private func attach(_ waiter: Waiter, to model: Model) {
        let request = waiter.request
        if case .book(let book) = model, !request.reads(book.library) {
            // In a library its subscriber may not read: as if it did not exist.
            return waiter.outcome(.absentWithoutTrace)
        }
        let subscriber = Subscriber(id: nextSubscriberID, request: request, sink: waiter.open(nextSubscriberID))
        nextSubscriberID += 1
        counters.subscribers.add(1, ordering: .relaxed)
        waiter.outcome(.subscribed)
        let audience = audiences[request.target] ?? Audience()
        audiences[request.target] = audience
        audience.add(subscriber)
        switch model {
        case .book(let book): track(book)
        case .library(let library): track(library)
        }
        start(subscriber, model: model)
    }

    /// Sends a new subscriber its first events: a snapshot, or what it missed since its id.
    private func start(_ subscriber: Subscriber, model: Model) {
        let request = subscriber.request
        let stateSeq = max(appliedSeq, model.baseSeq)
        guard let after = request.resumeAfter, after <= stateSeq, after >= stateSeq - store.history else {
            return sendSnapshot(of: model, to: subscriber, seq: stateSeq)
        }
        resume(subscriber, after: after, stateSeq: stateSeq, model: model)
    }

    /// Sends a resuming subscriber what it missed from `after` through `stateSeq` (the state the
    /// live side is at), holding live changes meanwhile (`LogReplay` reads the log).
    func resume(_ subscriber: Subscriber, after: Int, stateSeq: Int, model: Model?) {
        guard after < stateSeq else { return subscriber.sink.settled(through: stateSeq) }  // nothing was missed
        subscriber.held = Subscriber.Held()
        logReplay.read(for: subscriber, after: after, through: stateSeq) { result, events in
            self.replay(result, to: subscriber, events: events, model: model, stateSeq: stateSeq)
        }
    }

    /// Sends a resuming subscriber what it missed (`events`, made from `result`), then what
    /// arrived meanwhile.
    private func replay(
        _ result: Result<[CommittedChange]?, StoreError>,
        to subscriber: Subscriber,
        events: [LiveEvent],
        model: Model?,
        stateSeq: Int
    ) {
        guard !subscriber.removed else { return }  // the stream closed meanwhile
        guard case .success(.some) = result else {
            // The history no longer reaches back far enough (or could not be read): start afresh.
            let delete = subscriber.held?.events.delete
            subscriber.held = nil
            if let delete {
                subscriber.deliver(delete)
                return subscriber.sink.settled(through: delete.seq)
            }
            guard let model else { return sendSnapshot(to: subscriber) }
            return sendSnapshot(of: model, to: subscriber, seq: max(appliedSeq, model.baseSeq))
        }
        subscriber.release(after: events)
        subscriber.sink.settled(through: stateSeq)
    }

    /// No such resource now. A subscriber resuming across its deletion gets what it missed up to
    /// the `delete`, while the change log holds it; anybody else gets a 404
    /// (`.deletedBeyondHistory` when the log no longer reaches back to its id,
    /// `.absentWithoutTrace` when the log shows no deletion at or before its id either).
    private func notFound(_ waiter: Waiter) {
        let request = waiter.request
        guard let after = request.resumeAfter else { return waiter.outcome(.notFound) }
        store.changes(of: request.target, after: after, through: nil) { result in
            LiveActor.enqueue {
                let changes: [CommittedChange]
                switch result {
                case .failure(let error): return waiter.outcome(.failed(error))
                case .success(nil): return waiter.outcome(.deletedBeyondHistory)
                case .success(let logged?): changes = logged
                }
                let events = LogReplay.events(replaying: changes, for: request)
                guard let last = events.last, last.kind == .delete else {
                    return self.store.loggedDeletion(of: request.target, through: after) { result in
                        switch result {
                        case .success(true): waiter.outcome(.notFound)
                        case .success(false): waiter.outcome(.absentWithoutTrace)
                        case .failure(let error): waiter.outcome(.failed(error))
                        }
                    }
                }
                let subscriber = Subscriber(
                    id: self.nextSubscriberID, request: request, sink: waiter.open(self.nextSubscriberID))
                self.nextSubscriberID += 1
                waiter.outcome(.subscribed)
                events.forEach { subscriber.deliver($0, coalescing: false) }  // the delete ends the stream
                subscriber.sink.settled(through: last.seq)
            }
        }
    }

    /// Sends `subscriber` the state of `model` at `seq`: a snapshot, or a kept one and the change
    /// since (`KeptSnapshots`).
    private func sendSnapshot(of model: Model, to subscriber: Subscriber, seq: Int) {
        let shape = subscriber.request.shape
        switch model {
        case .book(let book):
            var event = LiveEvent(kind: .snapshot, seq: seq, id: book.id)
            event.bookFields = ResourceDelta.values(shape.bookFields) { book[$0] }
            subscriber.deliver(event)
        case .library(let library):
            // Not for a subscriber whose resume fell past the history (or whose replay failed):
            // its snapshot must be newer than the id it resumed from. Nor one older than the
            // history with nothing after it: a client resuming from its id would start afresh.
            if subscriber.request.resumeAfter == nil, let kept = library.snapshots[shape] {
                let change = library.snapshots.catchUp(library.id, to: seq, for: shape)
                if change != nil || seq - kept.seq <= store.history {
                    if kept.seq < seq { library.snapshots.noteJoin() }  // not the one it was made for
                    subscriber.deliver(kept)
                    if let change { subscriber.deliver(change) }
                    break
                }
            }
            let event = snapshot(of: library, shape, seq: seq)
            library.snapshots.keep(event, for: shape)
            subscriber.deliver(event)
        }
        subscriber.sink.settled(through: seq)
    }

    private func snapshot(of library: LiveLibrary, _ shape: SubscriptionRequest.Shape, seq: Int) -> LiveEvent {
        var table: LiveEvent.MemberTable?
        if shape.members {
            let members = library.orderedMembers()
            var made = LiveEvent.memberTable(for: shape, capacity: members.count)
            made.append(books: members, id: { $0.id }, order: { $0.order }) { $0[$1] }
            table = made
        }
        return LiveEvent.librarySnapshot(
            id: library.id, seq: seq, shape: shape, fields: { library[$0] }, members: table)
    }

    /// The subscriber `id` of `target` may from now on read only the libraries `readable` (its
    /// stream's credential was replaced by one with narrower rights). Returns whether it may still
    /// read its target as it does: a library or a book (in the library it is in now) it can still
    /// read goes on, the book's later moves judged by the new rights; a collection goes on only
    /// if the new rights take away none of the libraries it was opened with (its items were
    /// chosen by those). False when no such subscriber is here.
    package func narrow(_ id: Int, of target: LiveTarget, to readable: Set<String>?) -> Bool {
        guard let subscriber = audiences[target]?.subscriber(id) else { return false }
        switch target {
        case .library(let library):
            return readable?.contains(library) ?? true
        case .book(let book):
            guard let library = books[book]?.library, readable?.contains(library) ?? true else { return false }
            subscriber.request.readable = readable
            return true
        case .libraries, .books, .window:
            guard let readable else { return true }
            guard let opened = subscriber.request.readable else { return false }
            return opened.isSubset(of: readable)
        }
    }

    /// Forgets a subscriber whose stream ended, and the models nobody watches any more.
    package func unsubscribe(_ id: Int, from target: LiveTarget) {
        guard let audience = audiences[target], let subscriber = audience.remove(id) else { return }
        forget(subscriber)
        subscriber.remove()
        if case .library(let libraryID) = target {
            // The fields of a shape nobody has any more may no longer be observed.
            libraries[libraryID]?.snapshots.keep(only: audience.groups.keys)
        }
        if case .window(let window) = target, !audience.isEmpty {
            closeWindows(of: window, keeping: Set(audience.groups.keys.map(\.readable)))
        }
        guard audience.isEmpty else { return }
        audiences[target] = nil
        switch target {
        case .libraries, .books:
            collectionAudiences -= 1
        case .window(let window):
            collectionAudiences -= 1
            closeWindows(of: window, keeping: [])
        case .book(let bookID):
            books[bookID] = nil  // its library's, if watched, keeps it as a member
        case .library(let libraryID):
            if let library = libraries[libraryID] { drop(library) }
        }
        updateInbox()
    }
}

extension LiveEvent {
    /// A library's snapshot for `shape`: its own fields, then its members' (`memberTable`).
    static func librarySnapshot(
        id: String,
        seq: Int,
        shape: SubscriptionRequest.Shape,
        fields library: (LibraryField) -> FieldValue,
        members: MemberTable?
    ) -> LiveEvent {
        var event = LiveEvent(kind: .snapshot, seq: seq, id: id)
        event.libraryFields = ResourceDelta.values(shape.libraryFields, library)
        if shape.members { event.members = members }
        return event
    }

    /// The members' part of a library snapshot for `shape`, empty, to be appended to member
    /// after member.
    static func memberTable(for shape: SubscriptionRequest.Shape, capacity: Int) -> MemberTable {
        MemberTable(
            .books(BookField.allCases.filter { $0 != .id && shape.bookFields.contains($0) }), capacity: capacity)
    }
}
