import LibraryDomain
import SQLite

/// The schema migrations, embedded at build time from `Migrations/*.sql`.
package enum LibraryMigrations {
    /// A migrator over every embedded migration, in version order.
    package static func migrator() throws -> Migrator {
        try Migrator(EmbeddedMigrations.files.map { try Migration(name: $0.name, sql: $0.contents) })
    }
}
