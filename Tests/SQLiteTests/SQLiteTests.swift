import Digest
import Foundation
import Testing

@testable import SQLite

/// A fresh directory for database files, removed at the end of the test.
func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    let path = NSTemporaryDirectory() + "sqlite-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    try body(path)
}

@Suite struct SHA256Tests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func digest_MatchesPublishedVectors(input: String, expected: String) {
        #expect(SHA256.hex(of: Array(input.utf8)) == expected)
    }
}

@Suite struct ConnectionTests {
    @Test func statement_BindsAndReadsEveryType() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, n TEXT)")
        try connection.statement("INSERT INTO t VALUES (?, ?, ?, ?)").run([.int(42), .real(1.5), .text("héllo"), .null])
        let row = try connection.statement("SELECT i, s, n FROM t").first {
            ($0.int(0), $0.text(1), $0.optionalText(2))
        }
        #expect(row?.0 == 42)
        #expect(row?.1 == "héllo")
        #expect(row?.2 == nil)
    }

    @Test func statement_IsPreparedOnceAndReused() throws {
        let connection = try Connection(path: ":memory:")
        let first = try connection.statement("SELECT 1")
        let second = try connection.statement("SELECT 1")
        #expect(first === second)
    }

    @Test func transaction_RollsBackWhenItsBodyThrows() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (x INTEGER)")
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try connection.transaction {
                try connection.statement("INSERT INTO t VALUES (1)").run()
                throw Abort()
            }
        }
        #expect(try connection.statement("SELECT count(*) FROM t").first { $0.int(0) } == 0)
    }

    @Test func error_NamesTheCodeAndSQLButNotTheValues() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE t (x TEXT UNIQUE)")
        let insert = try connection.statement("INSERT INTO t VALUES (?)")
        try insert.run([.text("secret-value")])
        do {
            try insert.run([.text("secret-value")])
            Issue.record("expected a constraint error")
        } catch {
            #expect(error.code == 19)
            #expect(error.description.contains("INSERT INTO t"))
            #expect(!error.description.contains("secret-value"))
        }
    }

    @Test func open_FailsClearlyOnAFileThatIsNotADatabase() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/not-a-db.sqlite"
            try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
            #expect(throws: SQLiteError.self) { try Connection(path: path) }
        }
    }

    @Test func writer_UsesWALOnAFile() throws {
        try withTemporaryDirectory { directory in
            let connection = try Connection(path: directory + "/wal.sqlite")
            #expect(try connection.statement("PRAGMA journal_mode").first { $0.text(0) } == "wal")
            #expect(try connection.statement("PRAGMA foreign_keys").first { $0.int(0) } == 1)
            #expect(try connection.statement("PRAGMA synchronous").first { $0.int(0) } == 1)  // NORMAL
        }
    }
}

@Suite struct MigratorTests {
    let first = try! Migration(name: "0001_create.sql", sql: "CREATE TABLE a (x INTEGER);")
    let second = try! Migration(name: "0002_more.sql", sql: "CREATE TABLE b (y INTEGER);")

    @Test func migrate_AppliesPendingMigrationsInOrderOnce() throws {
        let connection = try Connection(path: ":memory:")
        let applied = try Migrator([second, first]).migrate(connection)
        #expect(applied.map(\.version) == [1, 2])
        #expect(try Migrator([first, second]).migrate(connection).isEmpty)
        let recorded = try connection.statement("SELECT version, checksum FROM schema_migrations ORDER BY version")
            .map { ($0.int(0), $0.text(1)) }
        #expect(recorded.map(\.0) == [1, 2])
        #expect(recorded[0].1 == first.checksum)
    }

    @Test func migrate_RefusesAMigrationChangedAfterItWasApplied() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/m.sqlite"
            try Migrator([first]).migrate(try Connection(path: path))
            let edited = try Migration(name: "0001_create.sql", sql: "CREATE TABLE a (x INTEGER, z TEXT);")
            do {
                try Migrator([edited, second]).migrate(try Connection(path: path))
                Issue.record("expected a refusal")
            } catch let error as SQLiteError {
                #expect(error.description.contains("0001_create.sql was changed"))
            }
            // Nothing after the refusal was applied.
            let tables = try Connection(path: path).statement("SELECT count(*) FROM sqlite_schema WHERE name = 'b'")
                .first { $0.int(0) }
            #expect(tables == 0)
        }
    }

    @Test func migrate_RefusesADatabaseFromANewerBuild() throws {
        let connection = try Connection(path: ":memory:")
        try Migrator([first, second]).migrate(connection)
        #expect(throws: SQLiteError.self) { try Migrator([first]).migrate(connection) }
    }

    @Test func migrate_RollsBackAFailedMigrationWhole() throws {
        let connection = try Connection(path: ":memory:")
        let broken = try Migration(name: "0002_broken.sql", sql: "CREATE TABLE c (x INTEGER); SELECT * FROM missing;")
        #expect(throws: SQLiteError.self) { try Migrator([first, broken]).migrate(connection) }
        #expect(
            try connection.statement("SELECT count(*) FROM sqlite_schema WHERE name = 'c'").first { $0.int(0) } == 0)
        #expect(try connection.statement("SELECT count(*) FROM schema_migrations").first { $0.int(0) } == 1)
    }

    @Test func migrator_RejectsBadNamesAndDuplicateVersions() throws {
        #expect(throws: SQLiteError.self) { try Migration(name: "create.sql", sql: "") }
        let duplicate = try Migration(name: "0001_other.sql", sql: "")
        #expect(throws: SQLiteError.self) { try Migrator([first, duplicate]) }
    }
}

@Suite struct DatabasePoolTests {
    @Test func readers_SeeWritesCommittedByTheWriter() throws {
        try withTemporaryDirectory { directory in
            let pool = try DatabasePool(path: directory + "/pool.sqlite", laneCount: 1, backgroundReaderCount: 1) {
                try $0.execute("CREATE TABLE t (x INTEGER)")
            }
            defer { pool.close() }
            _ = try pool.writeAndWait { try $0.statement("INSERT INTO t VALUES (7)").run() }
            for _ in 0..<4 {
                let done = DispatchSemaphore(value: 0)
                let seen = LockedValue(0)
                pool.read { connection in
                    seen.set((try? connection.statement("SELECT sum(x) FROM t").first { $0.int(0) }) ?? -1)
                    done.signal()
                }
                done.wait()
                #expect(seen.get() == 7)
            }
        }
    }
}

@Suite struct CheckpointTests {
    @Test func theWALIsCheckpointedAndStartsOverUnderSustainedWrites() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/wal.sqlite"
            let pool = try DatabasePool(path: path, laneCount: 1, backgroundReaderCount: 1, checkpointPages: 200) {
                try $0.execute("CREATE TABLE t (x BLOB)")
            }
            @Sendable func commit() throws {
                _ = try pool.writeAndWait { connection in
                    try connection.transaction {
                        for _ in 0..<40 { try connection.statement("INSERT INTO t VALUES (zeroblob(4000))").run() }
                    }
                }
            }
            // 600 commits of about 40 pages each, back to back: 24,000 pages, which without
            // checkpoints would all stay in the WAL (the file keeps its largest size).
            for _ in 0..<600 { try commit() }
            let walPages = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0) / 4096
            #expect(walPages > 0 && walPages < 20_000)
            // Then at a gentler pace: the WAL starts over from its first page again and again.
            for _ in 0..<20 {
                try commit()
                usleep(50_000)
            }
            let framesNow = try pool.writeAndWait {
                try $0.statement("PRAGMA wal_checkpoint(PASSIVE)").first { $0.int(1) }
            }
            #expect((framesNow ?? .max) < 1_000)
            #expect(try pool.readNow { try $0.statement("SELECT count(*) FROM t").first { $0.int(0) } } == 24_800)
            #expect(pool.close() == nil)
            let walAfterClose = try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
            #expect((walAfterClose ?? 0) == 0)
        }
    }
}

final class LockedValue<T: Sendable>: @unchecked Sendable {  // guarded by `lock`
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func get() -> T { lock.withLock { value } }
    func set(_ newValue: T) { lock.withLock { value = newValue } }
}
