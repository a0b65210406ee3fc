import LibraryDomain
import SQLite

@testable import LibraryStorage

extension LibraryWriter {
    /// The SQLite connection under a writer, for tests that inspect SQLite itself; nil on PostgreSQL.
    var connection: Connection? {
        guard case .sqlite(let connection)? = (rows as? SQLRows)?.session else { return nil }
        return connection
    }
}
