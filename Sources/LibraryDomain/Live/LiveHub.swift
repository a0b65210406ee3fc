import Dispatch
import Synchronization

/// The live side of the store: watched libraries and books as `@Observable` models, and the
/// subscribers of their event streams.
///
/// Only what somebody watches is materialized. Every committed write reaches `apply` in commit
/// order; it assigns the new values to the models, Observation reports which tracked fields
/// changed, and `publish` turns that into at most one event per subscriber per write, carrying
/// only the fields that subscriber asked for.
@LiveActor
package final class LiveHub {
    let store: LibraryStore
    var books: [String: LiveBook] = [:]
    var libraries: [String: LiveLibrary] = [:]
    /// The last change applied to the models.
    var appliedSeq = 0
    private var dirtyBooks: [LiveBook] = []
    private var dirtyLibraries: [LiveLibrary] = []
    var nextSubscriberID = 1
    private var heartbeat: (any DispatchSourceTimer)?
    /// How many subscribers want each field of a book (directly or through its library).
    var bookFieldDemand: [String: [BookField: Int]] = [:]
    /// How many subscribers of a library want each of its fields, its membership, each member field.
    var libraryDemand: [String: Demand] = [:]
    /// Counters read by metrics from any thread.
    package nonisolated let counters = LiveCounters()

    struct Demand {
        var fields: [LibraryField: Int] = [:]
        var members = 0
        var memberFields: [BookField: Int] = [:]
    }

    private nonisolated init(store: LibraryStore) {
        self.store = store
    }

    /// Creates the hub, connects it to the store's commits, and sends a keep-alive comment to every
    /// idle stream each `heartbeatInterval` seconds.
    package nonisolated static func start(store: LibraryStore, heartbeatInterval: Double) -> LiveHub {
        let hub = LiveHub(store: store)
        let latest = (try? store.readAndWait { try $0.latestSeq() }) ?? 0
        store.observeCommits { change in
            LiveActor.enqueue { hub.apply(change) }
        }
        LiveActor.enqueue {
            hub.appliedSeq = max(hub.appliedSeq, latest)
            let timer = DispatchSource.makeTimerSource(queue: LiveActor.executor.queue)
            timer.schedule(deadline: .now() + heartbeatInterval, repeating: heartbeatInterval)
            timer.setEventHandler { LiveActor.assumeIsolated { hub.keepAlive() } }
            timer.resume()
            hub.heartbeat = timer
        }
        return hub
    }

    // MARK: Applying committed changes

    private func apply(_ change: CommittedChange) {
        guard change.seq > appliedSeq else { return }
        for item in change.items {
            switch item {
            case .book(let record, _, let previous, let deleted):
                applyBook(record, previousLibraryID: previous, deleted: deleted, seq: change.seq)
            case .library(let record, _, let deleted):
                applyLibrary(record, deleted: deleted, seq: change.seq)
            }
        }
        appliedSeq = change.seq
        publish(seq: change.seq)
    }

    private func applyBook(_ record: BookRecord, previousLibraryID: String?, deleted: Bool, seq: Int) {
        let live = books[record.id]
        if let previousLibraryID, previousLibraryID != record.libraryId || deleted {
            libraries[previousLibraryID]?.remove(record.id)
        }
        if deleted {
            if let live {
                for subscriber in live.subscribers.values {
                    subscriber.deliver(LiveEvent(kind: .delete, seq: seq, id: record.id))
                }
                forget(live.subscribers)
                live.subscribers = [:]
                books[record.id] = nil
                bookFieldDemand[record.id] = nil
            }
            return
        }
        live?.update(record)
        if let library = libraries[record.libraryId] {
            let book = live ?? materialize(record)
            library.add(book)
            trackMember(book, of: library)
        } else if let live, live.subscribers.isEmpty {
            books[record.id] = nil  // it left the only watched library it was in
        }
    }

    private func applyLibrary(_ record: LibraryRecord, deleted: Bool, seq: Int) {
        guard let live = libraries[record.id] else { return }
        guard !deleted else {
            for subscriber in live.subscribers.values {
                subscriber.deliver(LiveEvent(kind: .delete, seq: seq, id: record.id))
            }
            forget(live.subscribers)
            live.subscribers = [:]
            drop(live)
            return
        }
        live.update(record)
    }

    /// Counts out subscribers whose resource was deleted: their streams end on their own, and
    /// `unsubscribe` will no longer find them.
    private func forget(_ subscribers: [Int: Subscriber]) {
        counters.subscribers.subtract(subscribers.count, ordering: .relaxed)
        for subscriber in subscribers.values { counters.coalesced.add(subscriber.coalesced, ordering: .relaxed) }
    }

    func materialize(_ record: BookRecord) -> LiveBook {
        let book = LiveBook(record)
        books[record.id] = book
        return book
    }

    // MARK: Observation

    private func bookChanged(_ book: LiveBook, _ field: BookField) {
        if book.dirty.isEmpty { dirtyBooks.append(book) }
        book.dirty.insert(field)
    }

    private func libraryChanged(_ library: LiveLibrary, _ field: LibraryField?) {
        if library.dirty.isEmpty && !library.membersDirty { dirtyLibraries.append(library) }
        if let field { library.dirty.insert(field) } else { library.membersDirty = true }
    }

    func track(_ book: LiveBook) {
        let demand = bookFieldDemand[book.id, default: [:]]
        var fields = Set(demand.keys)
        if let library = libraries[book.libraryId], let memberDemand = libraryDemand[library.id] {
            fields.formUnion(memberDemand.memberFields.keys)
        }
        book.track(fields) { [unowned self] in bookChanged($0, $1) }
    }

    func track(_ library: LiveLibrary) {
        let demand = libraryDemand[library.id, default: Demand()]
        library.track(Set(demand.fields.keys), members: demand.members > 0) { [unowned self] in
            libraryChanged($0, $1)
        }
    }

    private func trackMember(_ book: LiveBook, of library: LiveLibrary) {
        guard let demand = libraryDemand[library.id], !demand.memberFields.isEmpty else { return }
        track(book)
    }

    // MARK: Publishing

    /// Turns what Observation reported for one write into events, then re-arms the trackers.
    private func publish(seq: Int) {
        var memberChanges: [String: [LiveBook]] = [:]
        for book in dirtyBooks {
            // Subscribers whose fields this write touched alike get the same event, encoded once.
            var events: [Set<BookField>: LiveEvent] = [:]
            for subscriber in book.subscribers.values {
                let fields = subscriber.request.bookFields.intersection(book.dirty)
                if events[fields] == nil {
                    var event = LiveEvent(kind: .change, seq: seq, id: book.id)
                    event.bookFields = Self.values(of: book, fields)
                    events[fields] = event
                }
                subscriber.deliver(events[fields]!)
            }
            if let library = libraries[book.libraryId] {
                if memberChanges[library.id] == nil && library.dirty.isEmpty && !library.membersDirty {
                    dirtyLibraries.append(library)
                }
                memberChanges[library.id, default: []].append(book)
            }
        }
        for library in dirtyLibraries {
            let current = library.books.map(\.id)
            let currentSet = Set(current)
            var added: [LiveBook] = []
            var removed: [String] = []
            if library.membersDirty {
                added = library.books.filter { !library.publishedMembers.contains($0.id) }
                removed = library.publishedMembers.subtracting(currentSet).sorted()
            }
            let addedIDs = Set(added.map(\.id))
            let changedMembers = (memberChanges[library.id] ?? []).filter {
                currentSet.contains($0.id) && !addedIDs.contains($0.id)
            }
            for subscriber in library.subscribers.values {
                let request = subscriber.request
                var event = LiveEvent(kind: .change, seq: seq, id: library.id)
                event.libraryFields = Self.values(of: library, request.libraryFields.intersection(library.dirty))
                if request.members {
                    var membership = LiveEvent.MembershipChange()
                    membership.added = added.map { Self.member($0, request.bookFields) }
                    membership.removed = removed
                    membership.changed = changedMembers.compactMap { book in
                        let fields = request.bookFields.intersection(book.dirty)
                        return fields.isEmpty ? nil : Self.member(book, fields)
                    }
                    if !membership.isEmpty { event.membership = membership }
                }
                subscriber.deliver(event)
            }
            library.publishedMembers = currentSet
        }
        for book in dirtyBooks {
            book.dirty = []
            track(book)
        }
        for library in dirtyLibraries {
            library.dirty = []
            library.membersDirty = false
            track(library)
        }
        dirtyBooks = []
        dirtyLibraries = []
    }

    private static func values(of book: LiveBook, _ fields: Set<BookField>) -> [(BookField, FieldValue)] {
        BookField.allCases.filter { $0 != .id && fields.contains($0) }.map { ($0, book.value(of: $0)) }
    }

    private static func values(of library: LiveLibrary, _ fields: Set<LibraryField>) -> [(LibraryField, FieldValue)] {
        LibraryField.allCases.filter { $0 != .id && fields.contains($0) }.map { ($0, library.value(of: $0)) }
    }

    private static func member(_ book: LiveBook, _ fields: Set<BookField>) -> LiveEvent.Member {
        LiveEvent.Member(id: book.id, fields: values(of: book, fields))
    }

    private func keepAlive() {
        for library in libraries.values {
            for subscriber in library.subscribers.values { subscriber.keepAlive() }
        }
        for book in books.values {
            for subscriber in book.subscribers.values { subscriber.keepAlive() }
        }
    }
}

/// Counters of the live side, readable from any thread.
package final class LiveCounters: Sendable {
    package let subscribers = Atomic<Int>(0)
    package let events = Atomic<Int>(0)
    package let coalesced = Atomic<Int>(0)
}
