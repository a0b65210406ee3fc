import Foundation
import LibraryDomain
import LibraryStorage
import PostgreSQL
import Synchronization
import Testing

/// The PostgreSQL store as replicas run it, against the server `LIBRARY_TEST_POSTGRES` names
/// (scripts/postgres-tests.sh): behind a pooler in transaction mode, and after a failover that lost
/// changes. Each test in a schema of its own.
private let postgresBase = ProcessInfo.processInfo.environment["LIBRARY_TEST_POSTGRES"]

@Suite(.enabled(if: postgresBase != nil, "set LIBRARY_TEST_POSTGRES, or run scripts/postgres-tests.sh"))
struct PostgresReplicaTests {
    /// A fresh schema's URI, and a cleanup that drops it.
    private func schema() throws -> (uri: String, drop: () -> Void) {
        let base = postgresBase!
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try PGConnection(base).execute("CREATE SCHEMA \(name)")
        let separator = base.contains("?") ? "&" : "?"
        return (
            base + separator + "options=-csearch_path%3D\(name)",
            {
                _ = try? PGConnection(base).executeScript(
                    "SET client_min_messages = warning; DROP SCHEMA \(name) CASCADE")
            }
        )
    }

    @Test func `opened as behind a transaction pooler, the store reads and writes what a direct one sees`() throws {
        let (uri, drop) = try schema()
        defer { drop() }
        let store = try PostgresLibraryStore(uri: uri, listenURI: uri)
        defer { store.close() }
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Pooled")) }
        for index in 0..<5 {
            _ = try store.writeAndWait {
                try $0.createBook(BookDraft(libraryId: library.id, title: "Book \(index)", author: "A"))
            }
        }
        let count = try store.readAndWait { try $0.library(id: library.id)?.bookCount }
        #expect(count == 5)
        let direct = try PostgresLibraryStore(uri: uri)
        defer { direct.close() }
        #expect(try direct.readAndWait { try $0.library(id: library.id)?.bookCount } == 5)
    }

    @Test func `an author PATCH is one statement that logs the author before, and its collection sees it leave`() throws
    {
        let (uri, drop) = try schema()
        defer { drop() }
        let store = try PostgresLibraryStore(uri: uri)
        defer { store.close() }
        let committed = Mutex<[CommittedChange]>([])
        store.observeCommits { change in committed.withLock { $0.append(change) } }
        let library = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "Authors")) }
        let book = try store.writeAndWait {
            try $0.createBook(BookDraft(libraryId: library.id, title: "Dune", author: "Herbert"))
        }
        var authorPatch = BookPatch()
        authorPatch[.author] = .string("F. Herbert")
        let patch = authorPatch
        let patched = try store.writeAndWait { try $0.patchBook(id: book.id, if: .versions([1]), patch) }
        #expect(patched.author == "F. Herbert" && patched.version == 2)
        // The change reaches the observer from the writer's thread after the commit; wait for it.
        let deadline = ContinuousClock.now + .seconds(5)
        while committed.withLock({ $0.count }) < 3, ContinuousClock.now < deadline { usleep(10_000) }
        let change = try #require(committed.withLock { $0.last })
        guard case .book(let logged, let fields, let before?, false) = try #require(change.items.first) else {
            Issue.record("not a book change with its values before: \(change.items)")
            return
        }
        #expect(logged.author == "F. Herbert" && fields == [.author, .version, .updatedAt])
        #expect(before[.author] == .string("Herbert"))
        let herbert = BookFilter([.author: .string("Herbert")])
        #expect(herbert.matches(before) && !herbert.matches(logged.keys), "the book left ?author=Herbert")
        // The replay from the log has the same value before.
        let replayed = try #require(
            try store.readSQLAndWait { try $0.changes(ofBook: book.id, after: 0, through: change.seq) }.last)
        guard case .book(_, _, let loggedBefore?, _) = try #require(replayed.items.first) else {
            Issue.record("the replayed change has no values before")
            return
        }
        #expect(loggedBefore[.author] == .string("Herbert"))
    }

    @Test func `another replica's commits come with their rows in the notification, in order, with no read of the log`()
        throws
    {
        let (uri, drop) = try schema()
        defer { drop() }
        let writer = try PostgresLibraryStore(uri: uri)
        defer { writer.close() }
        let listener = try PostgresLibraryStore(uri: uri)
        defer { listener.close() }
        let heard = Mutex<[CommittedChange]>([])
        let own = Mutex<[CommittedChange]>([])
        listener.observeCommits { change in heard.withLock { $0.append(change) } }
        writer.observeCommits { change in own.withLock { $0.append(change) } }
        // One write at a time: each batch one change, whose rows fit in its notification.
        let library = try writer.writeAndWait { try $0.createLibrary(LibraryDraft(name: #"Quoted "name" \ é"#)) }
        for index in 0..<50 {
            _ = try writer.writeAndWait { try $0.createBook(BookDraft(libraryId: library.id, title: "Book \(index)")) }
        }
        let sequential = 51
        let deadline = ContinuousClock.now + .seconds(10)
        while heard.withLock({ $0.count }) < sequential, ContinuousClock.now < deadline { usleep(10_000) }
        let fitting = listener.feedCounts
        // Then a library of them all deleted: one change too large for a notification.
        _ = try writer.writeAndWait { try $0.deleteLibrary(id: library.id, if: .none) }
        while heard.withLock({ $0.count }) < sequential + 1, ContinuousClock.now < deadline { usleep(10_000) }
        let mine = own.withLock { $0 }
        #expect(mine.count == sequential + 1)
        #expect(heard.withLock { $0.map(\.seq) } == mine.map(\.seq))
        #expect(heard.withLock { $0.map(\.items.count) } == mine.map(\.items.count))
        #expect(writer.feedCounts == FeedCounts(writer: sequential + 1), "its own come from its writer")
        // A read of the log may happen once a second when nothing comes; not for each batch.
        #expect(
            fitting.notification >= sequential - 2 && fitting.notification + fitting.log == sequential, "\(fitting)")
        #expect(listener.feedCounts.log == fitting.log + 1, "the change too large came from the log")
    }

    @Test func `two replicas writing at once take turns at the lock, and every change has its own id in commit order`()
        throws
    {
        let (uri, drop) = try schema()
        defer { drop() }
        let replicas = [try PostgresLibraryStore(uri: uri), try PostgresLibraryStore(uri: uri)]
        defer { replicas.forEach { $0.close() } }
        final class Heard: Sendable {
            let seqs = Mutex<[Int]>([])
        }
        let heard = [Heard(), Heard()]
        for (replica, heard) in zip(replicas, heard) {
            replica.observeCommits { change in heard.seqs.withLock { $0.append(change.seq) } }
        }
        let library = try replicas[0].writeAndWait { try $0.createLibrary(LibraryDraft(name: "Shared")) }
        let book = try replicas[0].writeAndWait {
            try $0.createBook(BookDraft(libraryId: library.id, title: "Initial", author: "A"))
        }
        // Both replicas write at once, many writes each: single-field PATCHes of one book (the
        // pipelined path) and new books (the general path).
        let done = DispatchGroup()
        let failures = Mutex<[String]>([])
        for index in 0..<400 {
            done.enter()
            let replica = replicas[index % 2]
            var patch = BookPatch()
            patch[.title] = .string("\(index)")
            let title = patch
            replica.write(
                { writer in
                    index % 4 < 2
                        ? try writer.patchBook(id: book.id, if: .none, title)
                        : try writer.createBook(BookDraft(libraryId: library.id, title: "new \(index)"))
                },
                plan: index % 4 < 2 ? LibraryWriter.singleFieldWrite(id: book.id, if: .none, title) : nil
            ) { result in
                if case .failure(let error) = result { failures.withLock { $0.append("\(error)") } }
                done.leave()
            }
        }
        done.wait()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(replicas[0].lockWaits + replicas[1].lockWaits > 0, "the replicas never met at the lock")
        let expected = Array(1...402)
        let deadline = ContinuousClock.now + .seconds(10)
        while heard.contains(where: { $0.seqs.withLock { $0.count } < expected.count }), ContinuousClock.now < deadline
        {
            usleep(10_000)
        }
        for heard in heard {
            #expect(heard.seqs.withLock { $0 } == expected, "each replica heard every change, in order")
        }
        let final = try replicas[1].readAndWait { try $0.book(id: book.id) }
        let count = try replicas[1].readAndWait { try $0.library(id: library.id)?.bookCount }
        #expect(final?.version == 201 && count == 201)
    }

    @Test func `a replica that missed changes already pruned from the log stops its feed as pruned`() throws {
        let (uri, drop) = try schema()
        defer { drop() }
        let gaps = Mutex<[FeedGap]>([])
        // This replica starts at change 0 and hears nothing until it observes.
        let late = try PostgresLibraryStore(uri: uri, onGap: { gap in gaps.withLock { $0.append(gap) } })
        defer { late.close() }
        let writer = try PostgresLibraryStore(uri: uri)
        defer { writer.close() }
        for index in 0..<5 {
            _ = try writer.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L\(index)")) }
        }
        // The history kept is changes 4 and 5 only (each change here is one row).
        try PGConnection(uri).execute(
            "DELETE FROM change_log WHERE item IN (SELECT item FROM change_log ORDER BY item LIMIT 3)")
        late.observeCommits { _ in }
        let deadline = Date().addingTimeInterval(10)
        while gaps.withLock({ $0.isEmpty }), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(gaps.withLock { $0 } == [.pruned(applied: 0, oldest: 4)])
    }

    @Test func `a change log that went back behind what a replica applied stops its feed as rewound`() throws {
        let (uri, drop) = try schema()
        defer { drop() }
        let gaps = Mutex<[FeedGap]>([])
        let store = try PostgresLibraryStore(uri: uri, onGap: { gap in gaps.withLock { $0.append(gap) } })
        defer { store.close() }
        store.observeCommits { _ in }
        for index in 0..<3 {
            _ = try store.writeAndWait { try $0.createLibrary(LibraryDraft(name: "L\(index)")) }
        }
        #expect(try store.latestCommittedSeq() == 3)
        // What a failover to a standby that had not received the last two commits leaves behind.
        try PGConnection(uri).execute("DELETE FROM change_log WHERE item > (SELECT min(item) FROM change_log)")
        let deadline = Date().addingTimeInterval(10)
        while gaps.withLock({ $0.isEmpty }), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(gaps.withLock { $0 } == [.rewound(applied: 3, latest: 1)])
    }
}
