import Dispatch
import LibraryDomain
import Synchronization
import Testing

@testable import LiveEngine

/// A store whose window reads complete when the test says, with the rows it says: what lets a
/// test commit changes while a window is being read.
final class HeldReadsStore: StubLiveStore, @unchecked Sendable {
    // `@unchecked Sendable`: its state is behind `lock`.
    private let lock = Mutex<State>(State())

    struct State {
        var observer: (@Sendable (CommittedChange) -> Void)?
        var reads: [@Sendable (Result<CollectionPage, StoreError>) -> Void] = []
    }

    func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        lock.withLock { $0.observer = observer }
    }
    func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) {
        lock.withLock { $0.reads.append(completion) }
    }

    var pendingReads: Int { lock.withLock { $0.reads.count } }

    /// Commits `change`: the hub hears of it.
    func commit(_ change: CommittedChange) { lock.withLock { $0.observer }?(change) }

    /// Completes the oldest read with `books`, as of change `seq`.
    func completeRead(_ books: [BookRecord], seq: Int) {
        let completion = lock.withLock { $0.reads.removeFirst() }
        completion(.success(CollectionPage(seq: seq, items: .books(books), isLast: true)))
    }
}

@Suite struct WindowHubTests {
    typealias Book = LiveWindowUnitTests

    /// Waits until the live actor has run what was enqueued before.
    func settle() async {
        await withCheckedContinuation { done in LiveActor.enqueue { done.resume() } }
    }

    func ids(_ event: LiveEvent) -> (added: [String], removed: [String]) {
        (event.membership?.added.map(\.id) ?? [], event.membership?.removed ?? [])
    }

    /// Changes committed while a window is read are applied to what the read returns, those it
    /// saw only once: a book the read brings in and a later change deletes is not shown (the
    /// window reads again for the row after it).
    @Test @LiveActor func changesDuringAReadApplyToItsRows() async throws {
        let store = HeldReadsStore()
        let hub = LiveHub.start(store: store, heartbeatInterval: 60)
        let window = BookWindow(BookQuery(order: ListOrder(.title)), start: .sorted(nil), limit: 3)
        let sink = PageRecordingSink()
        hub.subscribe(
            SubscriptionRequest(target: .window(window), bookFields: [.title], members: true),
            open: { _ in sink }, outcome: { _ in })
        let books = ["a", "b", "c", "d", "e"].enumerated().map { Book.book($0.offset + 1, title: $0.element) }
        let (a, b, c, d, e) = (books[0], books[1], books[2], books[3], books[4])
        await settle()
        #expect(store.pendingReads == 1)
        store.completeRead([a, b, d], seq: 1)  // c is elsewhere until change 2
        await settle()
        await settle()
        #expect(sink.sent.map(\.kind) == [.snapshot])

        // b leaves the full window: a read, which sees c.
        var renamed = b
        renamed.title = "z"
        renamed.version = 2
        store.commit(CommittedChange(seq: 2, items: [.book(renamed, fields: [.title], before: b.keys, deleted: false)]))
        await settle()
        #expect(store.pendingReads == 1)
        // Meanwhile c, which the read brings in, is deleted.
        store.commit(CommittedChange(seq: 3, items: [.book(c, fields: [], before: c.keys, deleted: true)]))
        await settle()
        store.completeRead([a, c, d], seq: 2)
        await settle()
        await settle()
        // The deletion, applied to what the read returned, takes a row out of a full window: read again.
        #expect(sink.sent.count == 1 && store.pendingReads == 1)
        store.completeRead([a, d, e], seq: 3)
        await settle()
        await settle()
        #expect(sink.sent.count == 2, "\(sink.sent.map(\.kind))")
        let change = try #require(sink.sent.last)
        #expect(ids(change).added == [e.id] && ids(change).removed == [b.id])
        #expect(store.pendingReads == 0)
    }
}

/// A sink that records what a subscriber sends, snapshot pages too.
@LiveActor final class PageRecordingSink: LiveEventSink {
    var sent: [LiveEvent] = []
    var isReady: Bool { true }
    func send(_ event: LiveEvent) { sent.append(event) }
    func whenReady(_ callback: @escaping @Sendable () -> Void) { callback() }
    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) {
        sent.append(event)
        next()
    }
    func keepAlive() {}
    func finish() {}
}
