import Foundation
import Glibc
import LibraryDomain
import Synchronization
import Testing

@testable import LibraryStorage

/// Collection snapshots read page by page, and the bound on their own connections.
@Suite struct PagedSnapshotStoreTests {
    /// Reads every page of `target` from `store`, in order, calling `between` after each.
    static func pages(
        _ store: SQLiteLibraryStore,
        _ target: LiveTarget,
        pageSize: Int,
        between: () throws -> Void = {}
    ) throws -> [CollectionPage] {
        let snapshot = store.snapshot(of: target, pageSize: pageSize, among: nil)
        defer { snapshot.close() }
        var pages: [CollectionPage] = []
        while pages.last?.isLast != true {
            pages.append(try next(of: snapshot))
            try between()
        }
        return pages
    }

    /// The snapshot's next page, waited for (up to 10 s).
    static func next(of snapshot: any CollectionSnapshot) throws -> CollectionPage {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<CollectionPage, StoreError>?>(nil)
        snapshot.next { page in
            result.withLock { $0 = page }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        return try #require(result.withLock { $0 }).get()
    }

    @Test(arguments: [":memory:", "file"])
    func snapshot_IsOneMomentAcrossPagesWhileWritesGoOn(database: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLibraryStore(
            path: database == "file" ? directory.appendingPathComponent("db").path : database)
        defer { store.close() }
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        var ids: [String] = []
        for index in 0..<25 {
            ids.append(
                try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "B\(index)")) }.id)
        }
        // A write between pages: not in this snapshot, whose pages all show one moment.
        let pages = try Self.pages(store, .books(BookFilter([.libraryId: .string(library.id)])), pageSize: 10) {
            _ = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "late")) }
        }
        #expect(pages.map(\.items.count) == [10, 10, 5])
        #expect(Set(pages.map(\.seq)).count == 1)
        let listed = pages.flatMap { page -> [String] in
            guard case .books(let books) = page.items else { return [] }
            return books.map(\.id)
        }
        #expect(listed == ids)
        // One page: read on a pooled reader, no connection of its own.
        let small = try Self.pages(store, .libraries, pageSize: 10)
        #expect(small.count == 1 && small[0].items.count == 1 && small[0].isLast)
    }

    @Test func slots_RunAtMostTheLimitAtOnceAndTheRestInTurn() throws {
        let slots = SnapshotSlots()
        let leases = Mutex<[SnapshotSlots.Lease]>([])
        /// Waits (up to 5 s) for `count` grants: a waiter is granted on another thread once a slot frees.
        func expectGrants(_ count: Int) {
            let deadline = Date().addingTimeInterval(5)
            while leases.withLock({ $0.count }) < count && Date() < deadline { usleep(1_000) }
            usleep(20_000)  // and no more than that
            #expect(leases.withLock { $0.count } == count)
        }
        func acquire() { slots.acquire(preempt: {}) { lease in leases.withLock { $0.append(lease!) } } }
        for _ in 0..<(SnapshotSlots.limit + 3) { acquire() }
        expectGrants(SnapshotSlots.limit)
        let held = leases.withLock { $0 }
        slots.release(held[0])
        slots.release(held[0])  // a second release of one lease frees nothing more
        slots.release(held[1])
        expectGrants(SnapshotSlots.limit + 2)
        for lease in leases.withLock({ $0 }).dropFirst(2) { slots.release(lease) }
        expectGrants(SnapshotSlots.limit + 3)
        acquire()
        #expect(leases.withLock { $0.count } == SnapshotSlots.limit + 4, "a free slot is granted at once")
    }

    /// A holder whose client leaves a page untaken gives its slot up while others wait; one that
    /// is reading keeps it; a waiter that no slot reaches in time is refused.
    @Test func slots_PreemptIdleHoldersForWaitersAndRefuseWaitersPastTheirTime() throws {
        let slots = SnapshotSlots(maxIdleHold: .milliseconds(100), maxWait: .seconds(3))
        let preempted = Mutex<Set<Int>>([])
        let granted = Mutex<[Int: SnapshotSlots.Lease]>([:])
        let refused = Mutex<Set<Int>>([])
        func acquire(_ index: Int) {
            // Weakly: the slots keep each lease, and a lease keeps this closure.
            slots.acquire(preempt: { [weak slots] in
                preempted.withLock { _ = $0.insert(index) }
                if let lease = granted.withLock({ $0[index] }) { slots?.release(lease) }
            }) { lease in
                if let lease {
                    granted.withLock { $0[index] = lease }
                } else {
                    refused.withLock { _ = $0.insert(index) }
                }
            }
        }
        for index in 0..<SnapshotSlots.limit { acquire(index) }
        let leases = granted.withLock { $0 }
        leases[0]!.pageHandedOut()  // its client has a page it does not take
        for index in 1..<SnapshotSlots.limit { leases[index]!.pageRequested() }  // the others read on
        acquire(100)
        acquire(101)
        let deadline = Date().addingTimeInterval(15)
        while (granted.withLock { $0[100] } == nil || refused.withLock { $0.isEmpty }) && Date() < deadline {
            usleep(5_000)
        }
        #expect(preempted.withLock { $0 } == [0], "only the idle holder was preempted")
        #expect(granted.withLock { $0[100] } != nil, "the first waiter got the idle holder's slot")
        #expect(refused.withLock { $0 } == [101], "the second found no idle holder and was refused in time")
        #expect(slots.preemptions.withLock { $0 } == 1 && slots.refusals.withLock { $0 } == 1)
        // The leases' closures see `granted`, which holds the leases: empty it, or they keep each other.
        for lease in granted.withLock({ $0.values }) { slots.release(lease) }
        granted.withLock { $0.removeAll() }
    }
    /// The page after the one handed out is read meanwhile, one and no more: reading overlaps
    /// sending, and a client that stops taking pages holds at most one page in memory.
    @Test func snapshot_ReadsTheNextPageAheadAndNoFurther() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ahead-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLibraryStore(path: directory.appendingPathComponent("db").path)
        defer { store.close() }
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        for index in 0..<50 {
            _ = try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "B\(index)")) }
        }
        let source = CountingSource(store)
        let snapshot = PagedSnapshot(
            store: source, target: .books(BookFilter([.libraryId: .string(library.id)])), pageSize: 10)
        defer { snapshot.close() }
        func next() throws -> CollectionPage { try Self.next(of: snapshot) }
        /// Waits (up to 5 s) for `count` pages read on the snapshot's own connection, then a little
        /// longer, to see that no more are read.
        func expectRead(_ count: Int) {
            let deadline = Date().addingTimeInterval(5)
            while source.reads.withLock({ $0 }) < count && Date() < deadline { usleep(1_000) }
            usleep(50_000)
            #expect(source.reads.withLock { $0 } == count)
        }
        var titles: [String] = []
        func take(_ page: CollectionPage) {
            guard case .books(let books) = page.items else { return }
            titles += books.map(\.title)
        }
        take(try next())  // read on a pooled reader, then again on its own connection
        expectRead(2)  // that one, and the second page ahead of its asking
        take(try next())
        expectRead(3)
        while true {
            let page = try next()
            take(page)
            if page.isLast { break }
        }
        expectRead(5)  // 50 books in pages of 10, and nothing after the last
        #expect(titles == (0..<50).map { "B\($0)" })
    }
}

/// A store whose snapshot connections count the work they are given: a page each, until closed.
private final class CountingSource: SnapshotSource {
    let store: SQLiteLibraryStore
    let reads = Mutex(0)

    init(_ store: SQLiteLibraryStore) { self.store = store }

    var snapshotSlots: SnapshotSlots { store.snapshotSlots }

    func readInTransaction<T: Sendable>(
        _ work: @escaping @Sendable (SQLReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        store.readInTransaction(work, completion: completion)
    }

    func openSnapshotReader() throws -> (any SnapshotReader)? {
        guard let reader = try store.openSnapshotReader() else { return nil }
        return CountingReader(reader: reader, source: self)
    }

    private struct CountingReader: SnapshotReader {
        let reader: any SnapshotReader
        let source: CountingSource

        func async(_ work: @escaping @Sendable (SQLSession) -> Void) {
            source.reads.withLock { $0 += 1 }
            reader.async(work)
        }

        func close() { reader.close() }
    }
}
