import Dispatch
import Foundation
import PostgreSQL
import Synchronization
import Testing

/// The PostgreSQL server these tests use: `LIBRARY_TEST_POSTGRES`, a libpq URI, which
/// `scripts/postgres-tests.sh` sets after starting a throwaway cluster on 127.0.0.1. Without it
/// the suite does not run (`swift test` needs no PostgreSQL).
let testServer = ProcessInfo.processInfo.environment["LIBRARY_TEST_POSTGRES"]

@Suite(.enabled(if: testServer != nil, "set LIBRARY_TEST_POSTGRES, or run scripts/postgres-tests.sh"))
struct PGConnectionTests {
    func connect() throws -> PGConnection { try PGConnection(testServer!) }

    /// A schema of its own per test, dropped after, so tests never see each other's tables.
    func withSchema<T>(_ body: (PGConnection, String) throws -> T) throws -> T {
        let connection = try connect()
        let schema = "t" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try connection.execute("CREATE SCHEMA \(schema)")
        try connection.execute("SET search_path TO \(schema)")
        defer { _ = try? connection.execute("DROP SCHEMA \(schema) CASCADE") }
        return try body(connection, schema)
    }

    @Test func parameters_RoundTripEveryKindOfValue() throws {
        try withSchema { connection, _ in
            try connection.execute("CREATE TABLE v (t text, i bigint, b boolean, n text)")
            let text = #"it's "quoted", \ back\slashed; ünïcødé 📚 and '); DROP TABLE v; --"#
            try connection.execute(
                "INSERT INTO v VALUES ($1, $2, $3, $4)",
                [.text(text), .int(-9_007_199_254_740_993), .bool(true), .null])
            let rows = try connection.execute("SELECT t, i, b, n FROM v")
            #expect(rows.count == 1)
            #expect(rows.string(0, 0) == text)
            #expect(rows.int(0, 1) == -9_007_199_254_740_993)
            #expect(rows.bool(0, 2) == true)
            #expect(rows.isNull(0, 3) && rows.string(0, 3) == nil)
            #expect(try connection.execute("UPDATE v SET b = $1", [.bool(false)]).affectedRows == 1)
        }
    }

    @Test func errors_CarryTheSQLStateAndNoBoundValues() throws {
        try withSchema { connection, _ in
            try connection.execute("CREATE TABLE u (k text PRIMARY KEY)")
            try connection.execute("INSERT INTO u VALUES ($1)", [.text("secret-value")])
            let duplicate = #expect(throws: PGError.self) {
                try connection.execute("INSERT INTO u VALUES ($1)", [.text("secret-value")])
            }
            #expect(duplicate?.sqlState == "23505")
            #expect(duplicate?.isConnectionFailure == false)
            #expect(!(duplicate?.description.contains("secret-value") ?? true), "\(String(describing: duplicate))")
            let syntax = #expect(throws: PGError.self) { try connection.execute("SELEC 1") }
            #expect(syntax?.sqlState == "42601")
            #expect(connection.isOpen, "a failed statement leaves the connection usable")
            #expect(try connection.execute("SELECT 1").int(0, 0) == 1)
        }
    }

    @Test func unnamedStatements_LeaveNothingPreparedOnTheSession() throws {
        let prepared = "SELECT count(*) FROM pg_prepared_statements"
        for (statements, expected) in [(PGStatements.unnamed, 0), (.prepared, 3)] {
            let connection = try PGConnection(testServer!, statements: statements)
            #expect(try connection.query("SELECT $1::int + 1", [.int(41)]).int(0, 0) == 42)
            let results = try connection.pipeline([
                ("SELECT $1::text", [.text("a")]), ("SELECT $1::int * 2", [.int(21)]),
            ])
            #expect(results.map { $0.string(0, 0) } == ["a", "42"])
            #expect(try connection.execute(prepared).int(0, 0) == expected, "\(statements)")
        }
    }

    @Test func transaction_CommitsOrRollsBack() throws {
        try withSchema { connection, _ in
            try connection.execute("CREATE TABLE n (x int)")
            try connection.transaction { try connection.execute("INSERT INTO n VALUES (1)") }
            struct Abort: Error {}
            #expect(throws: Abort.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO n VALUES (2)")
                    throw Abort()
                }
            }
            #expect(try connection.execute("SELECT count(*) FROM n").int(0, 0) == 1)
        }
    }

    @Test func connecting_ToNothing_IsAConnectionFailure() {
        let error = #expect(throws: PGError.self) {
            _ = try PGConnection("postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
        }
        #expect(error?.isConnectionFailure == true)
        #expect(error?.message.isEmpty == false)
    }

    @Test func migrator_AppliesOnceUnderItsLockThoughReplicasStartTogether() throws {
        let schema = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let setup = try connect()
        try setup.execute("CREATE SCHEMA \(schema)")
        defer { _ = try? setup.execute("DROP SCHEMA \(schema) CASCADE") }
        let migrations = [
            PGMigration(version: 1, name: "0001_a.sql", sql: "CREATE TABLE a (x int)", checksum: "1"),
            // Slow enough that replicas starting together would overlap without the lock.
            PGMigration(
                version: 2, name: "0002_b.sql", sql: "SELECT pg_sleep(0.3); CREATE TABLE b (y int)", checksum: "2"),
        ]
        let migrator = try PGMigrator(migrations)
        let applied = Mutex<[Int]>([])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let connection = try PGConnection(testServer!)
                try connection.execute("SET search_path TO \(schema)")
                let now = try migrator.migrate(connection)
                applied.withLock { $0 += now.map(\.version) }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(applied.withLock { $0 }.sorted() == [1, 2], "each migration applied exactly once")
        try setup.execute("SET search_path TO \(schema)")
        #expect(try setup.execute("SELECT count(*) FROM schema_migrations").int(0, 0) == 2)

        // An applied migration that changed, or one the binary does not know, is refused.
        var edited = migrations
        edited[0] = PGMigration(version: 1, name: "0001_a.sql", sql: "CREATE TABLE a (x text)", checksum: "1'")
        #expect(throws: PGError.self) { try PGMigrator(edited).migrate(setup) }
        #expect(throws: PGError.self) { try PGMigrator(Array(migrations.prefix(1))).migrate(setup) }
        #expect(throws: PGError.self) { try PGMigrator(migrations + [migrations[0]]) }
    }
}
