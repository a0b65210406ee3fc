import LibraryDomain
import PostgreSQL
import SQLite

extension StoreError {
    /// The store error for anything a database operation threw: SQLite's busy, read-only and
    /// full-disk results, and PostgreSQL's lost connections, shutdowns, lack of resources and
    /// serialization failures, are `unavailable` (503); every other failure `internal` (500).
    init(_ error: any Error) {
        if let error = error as? StoreError {
            self = error
        } else if let error = error as? SQLiteError {
            self.init(error.isUnavailable ? .unavailable : .internal, detail: error.description)
        } else if let error = error as? PGError {
            self.init(error.isTransient ? .unavailable : .internal, detail: error.description)
        } else {
            self.init(.internal, detail: String(describing: error))
        }
    }
}
