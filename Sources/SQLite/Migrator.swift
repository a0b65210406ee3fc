import Digest
import Foundation

/// One numbered schema change, read from a file named `NNNN_description.sql`.
package struct Migration: Sendable, Equatable {
    /// The number at the start of the file name; migrations run in this order.
    package let version: Int
    /// The file name, for messages.
    package let name: String
    /// The SQL to run.
    package let sql: String
    /// SHA-256 of the SQL, recorded when applied, so a later edit of the file is noticed.
    package let checksum: String

    /// Reads the version from `name` (`0001_create_tables.sql`).
    package init(name: String, sql: String) throws(SQLiteError) {
        let digits = name.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let version = Int(digits), name.hasSuffix(".sql") else {
            throw .migration("\(name) is not named NNNN_description.sql")
        }
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = SHA256.hex(of: Array(sql.utf8))
    }
}

/// Applies migrations in order, each in its own transaction, recording them in `schema_migrations`.
///
/// A migration that was applied is never run again; if its file changed since, or the database has a
/// migration this binary does not know, `migrate` refuses, and nothing is changed.
package struct Migrator: Sendable {
    package let migrations: [Migration]

    /// Fails on duplicate version numbers.
    package init(_ migrations: [Migration]) throws(SQLiteError) {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw .migration("\(previous.name) and \(next.name) share version \(next.version)")
        }
        self.migrations = sorted
    }

    /// Brings the database up to date and returns the migrations it applied now.
    @discardableResult
    package func migrate(_ connection: Connection) throws -> [Migration] {
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                checksum TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )
            """
        )
        let applied = try connection.statement("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
            .map { (version: $0.int(0), name: $0.text(1), checksum: $0.text(2)) }
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for record in applied {
            guard let migration = known[record.version] else {
                throw SQLiteError.migration(
                    "the database has migration \(record.name), which this build does not know; use a newer build"
                )
            }
            guard migration.checksum == record.checksum else {
                throw SQLiteError.migration(
                    "\(migration.name) was changed after it was applied; restore it and add a new migration instead"
                )
            }
        }
        let done = Set(applied.map(\.version))
        let pending = migrations.filter { !done.contains($0.version) }
        let now = ISO8601DateFormatter().string(from: Date())
        for migration in pending {
            do {
                try connection.transaction {
                    try connection.execute(migration.sql)
                    try connection.statement(
                        "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)"
                    ).run([.int(migration.version), .text(migration.name), .text(migration.checksum), .text(now)])
                }
            } catch let error as SQLiteError {
                throw SQLiteError.migration("\(migration.name) failed: \(error.message)")
            }
        }
        return pending
    }
}
