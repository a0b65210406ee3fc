/// One numbered PostgreSQL schema change, with the checksum of its SQL.
package struct PGMigration: Sendable, Equatable {
    package let version: Int
    package let name: String
    package let sql: String
    /// A digest of `sql` recorded when applied, so that a later edit of the file is noticed.
    package let checksum: String

    package init(version: Int, name: String, sql: String, checksum: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = checksum
    }
}

/// Applies PostgreSQL migrations in order, each in its own transaction, recorded in
/// `schema_migrations`, all under one session-level advisory lock: replicas that start together
/// take turns, and each finds the others' work done. An applied migration whose checksum changed,
/// or one the database has and this binary does not know, is refused before anything runs.
package struct PGMigrator: Sendable {
    /// The advisory lock key (any 64-bit number no other code of the database uses).
    package static let lockKey = 0x6C69_6272_6172_7931  // "library1"

    package let migrations: [PGMigration]

    package init(_ migrations: [PGMigration]) throws(PGError) {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw PGError.migration("\(previous.name) and \(next.name) share version \(next.version)")
        }
        self.migrations = sorted
    }

    /// Brings the database up to date and returns the migrations this call applied.
    @discardableResult
    package func migrate(_ connection: PGConnection) throws -> [PGMigration] {
        try connection.execute("SELECT pg_advisory_lock($1)", [.int(Self.lockKey)])
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [.int(Self.lockKey)]) }
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let rows = try connection.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        var applied: Set<Int> = []
        for row in 0..<rows.count {
            let version = rows.int(row, 0) ?? -1
            let name = rows.string(row, 1) ?? "?"
            guard let migration = known[version] else {
                throw PGError.migration("the database has migration \(name), which this binary does not know")
            }
            guard migration.checksum == rows.string(row, 2) else {
                throw PGError.migration("\(migration.name) was edited after it was applied")
            }
            applied.insert(version)
        }
        var now: [PGMigration] = []
        for migration in migrations where !applied.contains(migration.version) {
            try connection.transaction {
                try connection.executeScript(migration.sql)
                try connection.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    [.int(migration.version), .text(migration.name), .text(migration.checksum)])
            }
            now.append(migration)
        }
        return now
    }
}
