import Dispatch
import Foundation
import LibraryDomain
import SQLite
import Synchronization
import Testing

@testable import LibraryStorage

/// Group commit (`GroupCommitter`), on SQLite's transactions: which writes share a transaction,
/// which run again, and when each is answered. PostgreSQL's transactions are driven by the same
/// committer (the API suite and `PostgresReplicaTests` run it there).
@Suite struct GroupCommitTests {
    struct Refused: Error {}

    /// The store on a fresh file with a table `t (x INTEGER UNIQUE)` (and `extra` SQL), with the
    /// size of each committed transaction recorded.
    final class Fixture: Sendable {
        let directory: String
        let store: SQLiteLibraryStore
        let record = Record()

        /// The size of each committed transaction, and how each write was answered.
        final class Record: Sendable {
            let transactions = Mutex<[Int]>([])
            let log = Mutex<[String]>([])
        }

        init(extra: String = "") throws {
            directory = NSTemporaryDirectory() + "group-commit-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            store = try SQLiteLibraryStore(path: directory + "/group.sqlite")
            try store.writeAndWait { writer in
                try writer.connection!.execute("CREATE TABLE t (x INTEGER UNIQUE);" + extra)
            }
            store.observeTransactions { [record] _, writes in record.transactions.withLock { $0.append(writes) } }
        }

        deinit {
            store.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Queues `writes` while the writer is busy, so that they all go into one batch, and waits
        /// until each is answered; returns how each was answered, in order.
        func commitTogether(_ writes: [(name: String, body: @Sendable (Connection) throws -> Void)]) -> [String] {
            let release = DispatchSemaphore(value: 0)
            store.pool.write { _ in release.wait() }
            let runs = Mutex<[String: Int]>([:])
            let answered = DispatchGroup()
            for (name, body) in writes {
                answered.enter()
                store.write { writer in
                    runs.withLock { $0[name, default: 0] += 1 }
                    try body(writer.connection!)
                } completion: { [record] result in
                    let count = runs.withLock { $0[name] ?? 0 }
                    let outcome = (try? result.get()) != nil ? "committed" : "failed"
                    record.log.withLock { $0.append("\(name) \(outcome) after \(count) run(s)") }
                    answered.leave()
                }
            }
            release.signal()
            answered.wait()
            return record.log.withLock { log in
                defer { log = [] }
                return log
            }
        }

        func rows() throws -> String {
            try store.writeAndWait { writer in
                try writer.connection!.statement("SELECT group_concat(x) FROM t").first { $0.optionalText(0) } ?? nil
            } ?? ""
        }
    }

    static func insert(_ value: Int) -> @Sendable (Connection) throws -> Void {
        { try $0.statement("INSERT INTO t VALUES (\(value))").run() }
    }

    @Test
    func
        `a write refused before changing anything leaves the others in the transaction, and is answered after its commit`()
        throws
    {
        let fixture = try Fixture()
        let log = fixture.commitTogether([
            ("a", Self.insert(1)), ("b", { _ in throw Refused() }), ("c", Self.insert(2)),
        ])
        #expect(log == ["a committed after 1 run(s)", "b failed after 1 run(s)", "c committed after 1 run(s)"])
        #expect(fixture.record.transactions.withLock { $0 }.suffix(1) == [2])
        #expect(try fixture.rows() == "1,2")
    }

    @Test func `a write that fails after changing rows is undone alone, and the others run again`() throws {
        let fixture = try Fixture()
        let log = fixture.commitTogether([
            ("a", Self.insert(1)),
            (
                "b",
                { connection in
                    try GroupCommitTests.insert(2)(connection)
                    try GroupCommitTests.insert(1)(connection)  // violates UNIQUE
                }
            ),
            ("c", Self.insert(3)),
        ])
        // b's first row is gone with it; a ran again in a fresh transaction, which c joined.
        #expect(log == ["b failed after 1 run(s)", "a committed after 2 run(s)", "c committed after 1 run(s)"])
        #expect(fixture.record.transactions.withLock { $0 }.suffix(1) == [2])
        #expect(try fixture.rows() == "1,3")
    }

    @Test func `a failed commit fails every write in it, refused ones too, and the writer goes on`() throws {
        // A deferred foreign key is checked at COMMIT, so the commit itself fails.
        let fixture = try Fixture(
            extra: """
                CREATE TABLE parent (id INTEGER PRIMARY KEY);
                CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
                """)
        let log = fixture.commitTogether([
            ("a", { try $0.statement("INSERT INTO parent VALUES (1)").run() }),
            ("b", { _ in throw Refused() }),
            ("c", { try $0.statement("INSERT INTO child VALUES (9)").run() }),
        ])
        #expect(log == ["a failed after 1 run(s)", "b failed after 1 run(s)", "c failed after 1 run(s)"])
        let parents = try fixture.store.writeAndWait { writer in
            try writer.connection!.statement("SELECT count(*) FROM parent").first { $0.int(0) }
        }
        #expect(parents == 0)
        #expect(fixture.commitTogether([("d", Self.insert(5))]) == ["d committed after 1 run(s)"])
    }

    @Test func `a write queued after the store closed is answered as unavailable`() throws {
        let store = try SQLiteLibraryStore(path: ":memory:")
        store.close()
        let outcome = Mutex<Result<Int, StoreError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.write { _ in
            1
        } completion: { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        let result = outcome.withLock { $0 }
        guard case .failure(let error) = result else {
            Issue.record("a write after close was answered \(String(describing: result))")
            return
        }
        #expect(error.kind == .unavailable)
    }
}
