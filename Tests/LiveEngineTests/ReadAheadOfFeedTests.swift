import LibraryDomain
import Synchronization
import Testing

@testable import LiveEngine

/// A store whose reads see commits its feed has not told the hub of yet, as a replica's do: its
/// database answers at once, its feed (notifications or the change log) later.
final class LaggingFeedStore: StubLiveStore, @unchecked Sendable {
    // `@unchecked Sendable`: its state is behind `lock`.
    private let lock = Mutex<State>(State())

    struct State {
        var observer: (@Sendable (CommittedChange) -> Void)?
        /// What a load of each target returns.
        var loads: [LiveTarget: LoadedState] = [:]
    }

    func observeCommits(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        lock.withLock { $0.observer = observer }
    }
    func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        let state = lock.withLock { $0.loads[target] }
        completion(.success(state ?? LoadedState(seq: 1, resource: nil)))
    }

    /// What a load of `target` returns from now on.
    func setLoad(_ target: LiveTarget, _ state: LoadedState) { lock.withLock { $0.loads[target] = state } }

    /// The feed tells the hub of `change`.
    func feed(_ change: CommittedChange) { lock.withLock { $0.observer }?(change) }
}

@Suite struct ReadAheadOfFeedTests {
    func settle() async {
        for _ in 0..<3 {
            await withCheckedContinuation { done in LiveActor.enqueue { done.resume() } }
        }
    }

    static func book(title: String, version: Int) -> BookRecord {
        let named: [String: FieldValue] = [
            BookField.id.name: .string("book-1"), BookField.libraryId.name: .string("lib"),
            BookField.title.name: .string(title), BookField.version.name: .int(version),
        ]
        return BookRecord(seq: 1) { LoadedMembersTests.value(of: $0.descriptor, named) }
    }

    /// A library read ahead of the feed, one of whose members is live already (watched on its own,
    /// as the feed left it): its subscriber is told the member as read, with an id no later event
    /// repeats. Before, the library took the live member as it was, behind the read, and the
    /// feed's change of it then came as an event with the snapshot's own id (a replica's stream
    /// resumed across a failover got the same id twice).
    @Test @LiveActor func aLibraryReadAheadOfTheFeed_TellsItsLiveMembersAsRead_AndRepeatsNoID() async throws {
        let store = LaggingFeedStore()
        let hub = LiveHub.start(store: store, heartbeatInterval: 60)
        let library = LibraryRecord(seq: 1) {
            LoadedMembersTests.value(of: $0.descriptor, [LibraryField.id.name: .string("lib")])
        }
        let first = Self.book(title: "a", version: 1)
        store.setLoad(.book(first.id), LoadedState(seq: 1, resource: .book(first)))
        let bookSink = PageRecordingSink()
        hub.subscribe(
            SubscriptionRequest(target: .book(first.id), bookFields: [.title]), open: { _ in bookSink },
            outcome: { _ in })
        await settle()
        #expect(bookSink.sent.map(\.kind) == [.snapshot])

        // Change 2 renames the book; the database has it, the feed has not told the hub yet.
        let renamed = Self.book(title: "b", version: 2)
        let change = CommittedChange(
            seq: 2, items: [.book(renamed, fields: [.title], before: first.keys, deleted: false)])
        store.setLoad(.library("lib"), LoadedState(seq: 2, resource: .library(library, members: [renamed])))
        let librarySink = PageRecordingSink()
        hub.subscribe(
            SubscriptionRequest(target: .library("lib"), bookFields: [.title], members: true),
            open: { _ in librarySink }, outcome: { _ in })
        await settle()
        store.feed(change)
        await settle()

        let snapshot = try #require(librarySink.sent.first)
        #expect(snapshot.kind == .snapshot && snapshot.seq >= 2)
        let members = try #require(snapshot.members)
        let title = try #require(members.fields.firstIndex(of: BookField.title.name))
        #expect(members.values(of: 0)[members.values(of: 0).startIndex + title] == .string("b"))
        #expect(librarySink.sent.dropFirst().allSatisfy { $0.seq > snapshot.seq }, "\(librarySink.sent.map(\.seq))")
        #expect(bookSink.sent.map(\.seq) == [1, 2])
    }
}
