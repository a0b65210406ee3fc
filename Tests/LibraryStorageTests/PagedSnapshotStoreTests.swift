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
        _ store: LibraryStore,
        _ target: LiveTarget,
        pageSize: Int,
        between: () throws -> Void = {}
    ) throws -> [CollectionPage] {
        let snapshot = store.snapshot(of: target, pageSize: pageSize)
        defer { snapshot.close() }
        var pages: [CollectionPage] = []
        while pages.last?.isLast != true {
            let done = DispatchSemaphore(value: 0)
            let result = Mutex<Result<CollectionPage, StoreError>?>(nil)
            snapshot.next { page in
                result.withLock { $0 = page }
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            pages.append(try #require(result.withLock { $0 }).get())
            try between()
        }
        return pages
    }

    @Test(arguments: [":memory:", "file"])
    func snapshot_IsOneMomentAcrossPagesWhileWritesGoOn(database: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LibraryStore(path: database == "file" ? directory.appendingPathComponent("db").path : database)
        defer { store.close() }
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L")) }
        var ids: [String] = []
        for index in 0..<25 {
            ids.append(
                try store.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "B\(index)")) }.id)
        }
        // A write between pages: not in this snapshot, whose pages all show one moment.
        let pages = try Self.pages(store, .books(BookFilter(libraryId: library.id)), pageSize: 10) {
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
        let ran = Mutex(0)
        /// Waits (up to 5 s) for `count` runs: a waiter runs on another thread once a slot frees.
        func expectRuns(_ count: Int) {
            let deadline = Date().addingTimeInterval(5)
            while ran.withLock({ $0 }) < count && Date() < deadline { usleep(1_000) }
            usleep(20_000)  // and no more than that
            #expect(ran.withLock { $0 } == count)
        }
        for _ in 0..<(SnapshotSlots.limit + 3) { slots.acquire { ran.withLock { $0 += 1 } } }
        expectRuns(SnapshotSlots.limit)
        slots.release()
        slots.release()
        expectRuns(SnapshotSlots.limit + 2)
        for _ in 0..<(SnapshotSlots.limit + 1) { slots.release() }
        expectRuns(SnapshotSlots.limit + 3)
        slots.acquire { ran.withLock { $0 += 1 } }
        #expect(ran.withLock { $0 } == SnapshotSlots.limit + 4, "a free slot runs its work at once")
    }
}
