import Dispatch
import LibraryDomain
import Synchronization

/// The live side: watched libraries and books as `@Observable` models, and the subscribers of
/// their event streams.
///
/// Only what somebody watches is materialized. Committed changes arrive through a bounded inbox,
/// in commit order; `apply` assigns the new values to the models, Observation reports which
/// tracked fields changed, membership deltas come from the change itself, and `publish` turns
/// that into at most one event per subscriber per change, carrying only the fields it asked for.
/// Every step costs work for what the change touched and for the subscribers who want it, never
/// for the rest of a library or of the subscriber population.
@LiveActor
package final class LiveHub {
    let store: any LiveStore
    /// The books watched directly (`/books/{id}/events`). A watched library's members are found
    /// through it (`LiveLibrary.members`); one that is also watched directly is the same model.
    var books: [String: LiveBook] = [:]
    var libraries: [String: LiveLibrary] = [:]
    var audiences: [LiveTarget: Audience] = [:]
    /// How many of `audiences` watch a collection: while none do, changes skip that lookup.
    var collectionAudiences = 0
    /// The windows of book lists watched, by which and for whom; the lists they belong to, by
    /// query and by filter (what a change's book is looked up by).
    var windows: [LiveWindow.Key: LiveWindow] = [:]
    var windowGroups: [WindowGroup.Key: WindowGroup] = [:]
    var windowGroupsByFilter: [BookFilter: [ObjectIdentifier: WindowGroup]] = [:]
    /// Resources being read for their first subscribers, with the changes that concern them meanwhile.
    var loads: [LiveTarget: PendingLoad] = [:]
    /// Change-log reads for resuming subscribers, each shared by all who need it.
    let logReplay: LogReplay
    /// Committed changes on their way in, and the last one applied to the models.
    let intake: ChangeIntake
    var appliedSeq: Int { intake.appliedSeq }
    var nextSubscriberID = 1
    private var dirtyBooks: [LiveBook] = []
    private var touchedLibraries: [LiveLibrary] = []
    private var deletedBooks: [String] = []
    private var deletedLibraries: [LiveLibrary] = []
    private var heartbeat: (any DispatchSourceTimer)?
    package nonisolated let counters = LiveCounters()
    /// How the layer above encodes an event and the rows of a snapshot's table, given when the hub
    /// starts: a refreshed kept snapshot is encoded with it ahead of the subscribers who keep
    /// joining (`KeptSnapshots`), and a library's load encodes its first subscriber's members as it
    /// reads them, beside the read, rather than all at once after it (`LiveEvent.encodedMembers`).
    package struct Wire: Sendable {
        let event: @Sendable (LiveEvent) -> [[UInt8]]
        let rows: RowEncoder

        package init(event: @escaping @Sendable (LiveEvent) -> [[UInt8]], rows: @escaping RowEncoder) {
            self.event = event
            self.rows = rows
        }
    }

    /// Appends rows `range` of a table to the bytes, as the event encoder writes them between
    /// the brackets of a snapshot's members.
    package typealias RowEncoder = @Sendable (LiveEvent.MemberTable, Range<Int>, inout [UInt8]) -> Void

    /// Who is told of libraries of at least `members` members.
    package struct SizedObserver<Event>: Sendable {
        let members: Int
        let observe: @Sendable (Event) -> Void

        package init(from members: Int, _ observe: @escaping @Sendable (Event) -> Void) {
            self.members = members
            self.observe = observe
        }
    }

    /// Loads of large libraries: told true as one starts making its members, false once its
    /// models are attached. The server prepares the allocator for the burst (`HeapGrowth`).
    package typealias LargeLoads = SizedObserver<Bool>

    /// Large libraries let go: told (on the live actor, the models just let go) when a library of
    /// many members stops being watched. The server gives the memory back (`HeapTrimmer`).
    package typealias LargeDrops = SizedObserver<Void>

    /// What the layers above tell the hub when it starts: how events go on the wire, and who
    /// watches large loads and drops. Each is optional: a hub without `wire` encodes nothing ahead.
    package struct Observers: Sendable {
        package var wire: Wire?
        package var largeLoads: LargeLoads?
        package var largeDrops: LargeDrops?

        package init(wire: Wire? = nil, largeLoads: LargeLoads? = nil, largeDrops: LargeDrops? = nil) {
            self.wire = wire
            self.largeLoads = largeLoads
            self.largeDrops = largeDrops
        }
    }

    nonisolated let observers: Observers
    /// How many windows of lists (`LiveWindow`) the hub keeps at most (different queries, starts
    /// or rights): past it a new one is refused (503) until others close.
    nonisolated let maxWindows: Int
    /// What `maxWindows` is unless the hub is started with another.
    package nonisolated static let defaultMaxWindows = 10_000
    nonisolated var encoder: (@Sendable (LiveEvent) -> [[UInt8]])? { observers.wire?.event }
    nonisolated var rowEncoder: RowEncoder? { observers.wire?.rows }
    nonisolated var largeLoads: LargeLoads? { observers.largeLoads }

    private nonisolated init(store: any LiveStore, inboxCapacity: Int, maxWindows: Int, observers: Observers) {
        self.store = store
        self.observers = observers
        self.maxWindows = maxWindows
        logReplay = LogReplay(store: store)
        intake = ChangeIntake(capacity: inboxCapacity, counters: counters)
    }

    /// Creates the hub, connects it to the store's commits, and sends a keep-alive comment to every
    /// idle stream each `heartbeatInterval` seconds. When more than `inboxCapacity` committed
    /// changes wait for the live side, they fold (`ChangeInbox`). At most `maxWindows` windows of
    /// lists are open at once.
    package nonisolated static func start(
        store: any LiveStore,
        heartbeatInterval: Double,
        inboxCapacity: Int = 4_096,
        maxWindows: Int = defaultMaxWindows,
        observers: Observers = Observers()
    ) -> LiveHub {
        let hub = LiveHub(store: store, inboxCapacity: inboxCapacity, maxWindows: maxWindows, observers: observers)
        let latest = (try? store.latestCommittedSeq()) ?? 0
        hub.counters.committedSeq.raise(to: latest)
        hub.counters.publishedSeq.raise(to: latest)
        store.observeCommits { change in hub.post(change) }
        LiveActor.enqueue {
            hub.intake.applied(through: latest)
            let timer = DispatchSource.makeTimerSource(queue: LiveActor.executor.queue)
            timer.schedule(deadline: .now() + heartbeatInterval, repeating: heartbeatInterval)
            timer.setEventHandler { LiveActor.assumeIsolated { hub.keepAlive() } }
            timer.resume()
            hub.heartbeat = timer
        }
        return hub
    }

    // MARK: From the writer

    /// Called on the writer's thread for every commit, in commit order.
    private nonisolated func post(_ change: CommittedChange) {
        if intake.post(change) { LiveActor.enqueue { self.drain() } }
    }

    private func drain() {
        for change in intake.take() { apply(change) }
        intake.wakeWaiters()
    }

    /// Opens the inbox while anything is materialized, loading or watching a collection, closes it
    /// when nothing is.
    func updateInbox() {
        intake.setOpen(!books.isEmpty || !libraries.isEmpty || !loads.isEmpty || collectionAudiences > 0)
    }

    /// Calls `callback` once every change through `seq` has been applied and published (at once
    /// if it has).
    package func whenApplied(through seq: Int, _ callback: @escaping @LiveActor () -> Void) {
        intake.whenApplied(through: seq, callback)
    }

    /// The latest change whose events every subscriber has been handed.
    package var position: Int { appliedSeq }

    // MARK: Applying committed changes

    private func apply(_ change: CommittedChange) {
        guard intake.isNew(change.seq) else { return }
        for item in change.items {
            if !loads.isEmpty { noteForLoads(item, seq: change.seq) }
            switch item {
            case .book(let record, let fields, let before, let deleted):
                applyBook(record, fields: fields, previousLibraryID: before?.library, deleted: deleted, seq: change.seq)
            case .library(let record, let fields, let deleted):
                guard let library = libraries[record.id], library.baseSeq < change.seq else { continue }
                counters.applyWork.add(1, ordering: .relaxed)
                if deleted { deletedLibraries.append(library) } else { library.update(record, fields: fields) }
            }
        }
        intake.applied(through: change.seq)
        publish(seq: change.seq)
        if collectionAudiences > 0 { publishToCollections(change) }
        if !windows.isEmpty { publishToWindows(change) }
        counters.publishedSeq.raise(to: change.seq)
    }

    /// `fields`: those the write set (`ChangeItem`), the only ones the model compares and updates.
    private func applyBook(
        _ record: BookRecord, fields: Set<BookField>, previousLibraryID previous: String?, deleted: Bool, seq: Int
    ) {
        let id = record.id
        if let previous, previous != record.library, !deleted {
            evictReaders(ofMoved: id, to: record.library, seq: seq)
        }
        // Its model: the one its own subscribers watch, or its watched library's (found before it
        // leaves that library).
        let existing = books[id] ?? libraries[previous ?? record.library]?.members[id]
        if let previous, previous != record.library || deleted, let library = libraries[previous],
            library.baseSeq < seq, library.members[id] != nil
        {
            counters.applyWork.add(1, ordering: .relaxed)
            library.remove(id)
            library.left.append(id)
            touch(library)
        }
        let model = existing.flatMap { $0.baseSeq < seq ? $0 : nil }
        if deleted {
            if model != nil { deletedBooks.append(id) }
            return
        }
        if let model {
            counters.applyWork.add(1, ordering: .relaxed)
            // Armed here, at its first change, not when somebody asked for its fields: a library of
            // a million members then costs its subscribers no tracker for each member that never
            // changes (arming them all took about 5 s and 1 KiB each at that size).
            track(model)
            model.update(record, fields: fields)
        }
        if let library = libraries[record.library], library.baseSeq < seq, library.members[id] == nil {
            counters.applyWork.add(1, ordering: .relaxed)
            let book = existing ?? LiveBook(record, seq: seq)
            book.joinedSeq = seq
            library.add(book)
            library.joined.append(book)
            touch(library)
            track(book)
        }
    }

    /// A book moved to `library`: its subscribers who may not read that library get a `delete`
    /// (for them it no longer exists) and their streams end. Decided from the rights each
    /// subscriber holds, with no read.
    private func evictReaders(ofMoved id: String, to library: String, seq: Int) {
        guard let audience = audiences[.book(id)] else { return }
        let evicted = audience.subscribers.filter { !$0.request.reads(library) }
        guard !evicted.isEmpty else { return }
        let event = LiveEvent(kind: .delete, seq: seq, id: id)
        for subscriber in evicted {
            subscriber.deliver(event)
            unsubscribe(subscriber.id, from: .book(id))
        }
    }

    private func touch(_ library: LiveLibrary) {
        guard !library.touched else { return }
        library.touched = true
        touchedLibraries.append(library)
    }

    // MARK: Observation

    private func bookChanged(_ book: LiveBook, _ field: BookField) {
        if book.dirty.isEmpty { dirtyBooks.append(book) }
        book.dirty.insert(field)
    }

    private func libraryChanged(_ library: LiveLibrary, _ field: LibraryField?) {
        if let field { library.dirty.insert(field) }
        touch(library)
    }

    /// Tracks the fields of `book` that its own subscribers or those of its library want.
    func track(_ book: LiveBook) {
        var fields = audiences[.book(book.id)].map { Set($0.bookFields.keys) } ?? []
        if let library = libraries[book.library], library.members[book.id] === book,
            let demand = audiences[.library(library.id)]?.bookFields, !demand.isEmpty
        {
            fields.formUnion(demand.keys)
        }
        guard !fields.isEmpty else { return }
        let armed = book.track(fields) { [unowned self] in bookChanged($0, $1) }
        counters.trackersArmed.add(armed, ordering: .relaxed)
    }

    func track(_ library: LiveLibrary) {
        guard let audience = audiences[.library(library.id)] else { return }
        library.track(Set(audience.libraryFields.keys), members: audience.members > 0) { [unowned self] in
            libraryChanged($0, $1)
        }
    }

    /// Encodes refreshed kept snapshots off the live actor, as a stream would (one encoding shared
    /// with any stream that asks meanwhile), ahead of the subscribers who keep joining.
    private func encodeAhead(_ events: [LiveEvent]) {
        guard let encoder else { return }
        for event in events {
            event.wire.encodeElsewhere({ encoder(event) }) { _ in }
            counters.snapshotsEncodedAhead.add(1, ordering: .relaxed)
        }
    }

    // MARK: Publishing

    /// Turns what the change did into events, then re-arms the trackers.
    private func publish(seq: Int) {
        for book in dirtyBooks {
            counters.applyWork.add(1, ordering: .relaxed)
            if let audience = audiences[.book(book.id)] {
                var delta = ResourceDelta(id: book.id)
                delta.bookFields = ResourceDelta.values(book.dirty) { book[$0] }
                counters.applyWork.add(audience.deliver(delta, seq: seq), ordering: .relaxed)
            }
            if let library = libraries[book.library], library.members[book.id] === book, book.joinedSeq != seq {
                library.changedMembers.append(book)
                touch(library)
            }
        }
        for library in touchedLibraries {
            counters.applyWork.add(1, ordering: .relaxed)
            if library.snapshots.note(library) {
                library.snapshots.refresh(library, at: seq) { [unowned self] in encodeAhead($0) }
            }
            if !deletedLibraries.contains(where: { $0 === library }), let audience = audiences[.library(library.id)] {
                var delta = ResourceDelta(id: library.id)
                delta.libraryFields = ResourceDelta.values(library.dirty) { library[$0] }
                if audience.members > 0 {
                    delta.added = library.joined.map { book in
                        .init(id: book.id, fields: ResourceDelta.values(BookField.all) { book[$0] })
                    }
                    delta.removed = library.left
                    delta.changed = library.changedMembers.map { book in
                        .init(id: book.id, fields: ResourceDelta.values(book.dirty) { book[$0] })
                    }
                }
                counters.applyWork.add(audience.deliver(delta, seq: seq), ordering: .relaxed)
            }
        }
        for id in deletedBooks {
            if let audience = audiences.removeValue(forKey: .book(id)) { end(audience, deletedAt: seq, id: id) }
            books[id] = nil
        }
        for library in deletedLibraries {
            if let audience = audiences.removeValue(forKey: .library(library.id)) {
                end(audience, deletedAt: seq, id: library.id)
            }
            drop(library)
        }
        for book in dirtyBooks { book.dirty = [] }  // re-armed at its next change
        for library in touchedLibraries {
            library.dirty = []
            library.joined = []
            library.left = []
            library.changedMembers = []
            library.touched = false
            if libraries[library.id] === library { track(library) }
        }
        dirtyBooks = []
        touchedLibraries = []
        if !deletedBooks.isEmpty || !deletedLibraries.isEmpty {
            deletedBooks = []
            deletedLibraries = []
            updateInbox()
        }
    }

    /// Sends `delete` to every subscriber of a deleted resource; their streams end.
    private func end(_ audience: Audience, deletedAt seq: Int, id: String) {
        let event = LiveEvent(kind: .delete, seq: seq, id: id)
        for subscriber in audience.removeAll() {
            subscriber.deliver(event)
            forget(subscriber)
        }
    }

    /// Counts out a subscriber whose stream ended.
    func forget(_ subscriber: Subscriber) {
        counters.subscribers.subtract(1, ordering: .relaxed)
        counters.coalesced.add(subscriber.coalesced, ordering: .relaxed)
    }

    /// Stops watching a library: its members go with it, but for those watched directly (`books`).
    func drop(_ library: LiveLibrary) {
        libraries[library.id] = nil
        updateInbox()
        if let drops = observers.largeDrops, library.members.count >= drops.members { drops.observe(()) }
    }

    func keepAlive() {
        for audience in audiences.values {
            for subscriber in audience.subscribers { subscriber.keepAlive() }
        }
    }
}
