import LibraryDomain

/// A `LiveStore` for the hub's tests, which implement only what their case reads: every other
/// call is a test that went where it should not (a trap, not a silent answer).
protocol StubLiveStore: LiveStore {}

extension StubLiveStore {
    var history: Int { 1_000 }
    func latestCommittedSeq() throws(StoreError) -> Int { 1 }

    func load(_ target: LiveTarget, completion: @escaping @Sendable (Result<LoadedState, StoreError>) -> Void) {
        preconditionFailure("not used")
    }

    func changes(
        of target: LiveTarget, after seq: Int, through last: Int?,
        completion: @escaping @Sendable (Result<[CommittedChange]?, StoreError>) -> Void
    ) { preconditionFailure("not used") }

    func loggedDeletion(
        of target: LiveTarget, through seq: Int, completion: @escaping @Sendable (Result<Bool, StoreError>) -> Void
    ) { preconditionFailure("not used") }

    func read(
        _ window: BookWindow, among: Set<String>?,
        completion: @escaping @Sendable (Result<CollectionPage, StoreError>) -> Void
    ) { preconditionFailure("not used") }

    func snapshot(of collection: LiveTarget, pageSize: Int, among: Set<String>?) -> any CollectionSnapshot {
        preconditionFailure("not used")
    }
}
