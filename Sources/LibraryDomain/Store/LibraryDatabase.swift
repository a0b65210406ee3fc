import Dispatch
import Synchronization

/// The store seam: what the API and the live engine see of storage, whichever the engine.
///
/// An engine gives three things: reads (`LibraryReader`), the row operations of a write
/// transaction (`RecordRows`) and the running of reads and writes (`LibraryDatabase`, with the
/// live engine's `LiveStore`). The rules of a write (404, then 422, then 412; unchanged values
/// write nothing; book counts and moves; what the change log records) are `LibraryWriter`'s, over
/// the rows, so no engine repeats them. SQLite and PostgreSQL implement the seam in
/// `LibraryStorage`, an in-memory store in `LibraryMemoryStore`.

/// Reads of libraries and books, inside one of a store's reads or writes.
package protocol LibraryReader {
    /// Succeeds when the database answers.
    func ping() throws

    func library(id: String) throws -> LibraryRecord?

    /// A page of libraries in `order` (insertion order when nil) from `start`; only those whose id
    /// is in `among`, when given (what a principal may read). `start` is `.seq` exactly when
    /// `order` is nil.
    func libraries(sortedBy order: ListOrder<LibraryField>?, after start: ListStart, limit: Int, among: Set<String>?)
        throws -> Page<LibraryRecord>

    func book(id: String) throws -> BookRecord?

    /// A page of the books `query` lists, from `start`; only those of a library in `among`, when
    /// given (what a principal may read). `start` is `.seq` exactly when the query has no order.
    func books(_ query: BookQuery, after start: ListStart, limit: Int, among: Set<String>?) throws -> Page<BookRecord>

    /// The answer kept for an `Idempotency-Key`, if any and kept since `now` (seconds since 1970)
    /// minus `RememberedAnswer.retention` at most: an older one is expired, even before it is pruned.
    func rememberedAnswer(forKey key: String, now: Int) throws -> RememberedAnswer?
}

extension LibraryReader {
    /// Libraries after `seq`, in insertion order; among those ids only, when given.
    package func libraries(after seq: Int, limit: Int, among: Set<String>? = nil) throws -> Page<LibraryRecord> {
        try libraries(sortedBy: nil, after: .seq(seq), limit: limit, among: among)
    }

    /// Books matching `filter` after `seq`, in insertion order; of those libraries only, when given.
    package func books(_ filter: BookFilter, after seq: Int, limit: Int, among: Set<String>? = nil) throws
        -> Page<BookRecord>
    {
        try books(BookQuery(filter), after: .seq(seq), limit: limit, among: among)
    }
}

/// The rows a write changes, inside its transaction: what an engine does, with none of the
/// rules (`LibraryWriter` has them). Each call either does all it says or throws.
package protocol RecordRows: LibraryReader {
    /// Inserts a library made of `draft`, with `id`, version 1, no books, created and updated `now`.
    func insertLibrary(_ draft: LibraryDraft, id: String, now: String) throws -> LibraryRecord

    /// Inserts a book made of `draft`, with `id`, version 1, created and updated `now`.
    func insertBook(_ draft: BookDraft, id: String, now: String) throws -> BookRecord

    /// Sets the library's `changed` fields to `draft`'s values, counts a version and stamps `now`.
    func updateLibrary(id: String, changing changed: [LibraryField], to draft: LibraryDraft, now: String) throws
        -> LibraryRecord

    /// Sets the book's `changed` fields to `draft`'s values, counts a version and stamps `now`.
    func updateBook(id: String, changing changed: [BookField], to draft: BookDraft, now: String) throws -> BookRecord

    /// Deletes a library and its books; returns the books as they were, in insertion order.
    func deleteLibrary(id: String) throws -> [BookRecord]

    func deleteBook(id: String) throws

    /// Adds `delta` to the library's `bookCount`, counts a version and stamps `now`; nil when
    /// there is no such library.
    func adjustBookCount(ofLibrary id: String, by delta: Int, now: String) throws -> LibraryRecord?

    /// One field of a book set in one step, where the engine has one (SQL's `UPDATE … RETURNING`):
    /// only when the book exists, `precondition` allows its version and it holds another value.
    func updateSingleField(_ write: SingleFieldWrite, now: String) throws -> SingleFieldUpdate

    /// Keeps `answer` for `key` from `now` (seconds since 1970), and drops a few expired ones.
    func remember(_ answer: RememberedAnswer, forKey key: String, now: Int) throws
}

/// What `RecordRows.updateSingleField` did.
package enum SingleFieldUpdate {
    /// The field changed: the book after, and when the engine read it in the same step, the
    /// field's value before (else nil).
    case updated(BookRecord, previous: FieldValue?)
    /// Nothing changed: the book is missing, the precondition failed or the value is the same.
    /// The caller finds out which by the general path.
    case unchanged
    /// The engine has no single step for this field (or these values): take the general path.
    case unsupported
}

/// The answer a `POST` with an `Idempotency-Key` got, kept in the write's own transaction, so a
/// retry with the same key, on any replica, finds it exactly when the write committed.
package struct RememberedAnswer: Sendable {
    /// The SHA-256 of the request the key was first sent with (method, path and body).
    package let fingerprint: String
    package let status: Int
    package let headers: [(name: String, value: String)]
    package let body: [UInt8]

    package init(fingerprint: String, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.fingerprint = fingerprint
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// How long an answer is kept at least: 24 hours, as the contract promises.
    package static let retention = 24 * 3_600
}

/// What the API needs of a store, whichever the engine: reads, batched writes with their change
/// log, the live engine's `LiveStore`, health checks and a clean close.
package protocol LibraryDatabase: LiveStore {
    /// The names of the migrations applied when the store opened (empty when the schema was current).
    var appliedMigrationNames: [String] { get }

    /// Heap bytes the engine's library holds in this process (SQLite's page caches); nil when it
    /// has none of its own.
    var engineHeapBytes: Int? { get }

    /// Runs `work` with a reader for a request on event loop `lane`: on the calling thread when
    /// the engine can read without a network round trip (SQLite, memory), else on a database
    /// thread, so that no event loop ever waits on the network. `completion` gets the result
    /// either way.
    func read<T: Sendable>(
        lane: Int?,
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Runs `work` with a reader on a database thread and passes its result to `completion`.
    func read<T: Sendable>(
        _ work: @escaping @Sendable (any LibraryReader) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Runs `work` with a reader and waits for it (start-up and tests).
    func readAndWait<T: Sendable>(_ work: @escaping @Sendable (any LibraryReader) throws -> T) throws(StoreError)
        -> T

    /// Runs `work` as one write, in a transaction with its change-log entry, and passes its result
    /// to `completion` once committed (or failed); the commit observer hears of it first. `plan`
    /// says, when the caller knows it, that `work` is a single-field `PATCH` (its statement may
    /// then be sent ahead, with others).
    func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        plan: SingleFieldWrite?,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    )

    /// Sets what is told how long each write transaction took and how many writes it committed.
    func observeTransactions(_ observer: @escaping @Sendable (_ duration: Duration, _ writes: Int) -> Void)

    /// Checks that a write could start now; fails when the database cannot be written.
    func checkWritable(completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Finishes queued work and closes the database; returns what failed while closing, if anything.
    @discardableResult
    func close() -> StoreError?
}

extension LibraryDatabase {
    /// Runs `work` as one write, with no plan known ahead.
    package func write<T: Sendable>(
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        completion: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        write(work, plan: nil, completion: completion)
    }

    /// Runs `work` as one write and waits for its commit (setup and tests).
    package func writeAndWait<T: Sendable>(_ work: @escaping @Sendable (LibraryWriter) throws -> T) throws(StoreError)
        -> T
    {
        try waitFor { write(work, completion: $0) }
    }
}

/// Starts work that completes on another thread, with `start`, and waits for its result
/// (start-up and tests; never on an event loop).
package func waitFor<T: Sendable>(_ start: (@escaping @Sendable (Result<T, StoreError>) -> Void) -> Void)
    throws(StoreError) -> T
{
    let outcome = Mutex<Result<T, StoreError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    start { result in
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}
