import Foundation
import JSON
import LibraryModel
import NIOHTTP1

extension LibraryClient {
    /// Creates a library: `try await client.createLibrary { $0.name = "Central" }`.
    public func createLibrary(_ fill: (inout Changes<Library>) -> Void) async throws(LibraryClientError) -> Library {
        try await create("/libraries", fill, model: libraryModel)
    }

    /// Creates a book from the fields `fill` sets (`Changes` shows how).
    public func createBook(_ fill: (inout Changes<Book>) -> Void) async throws(LibraryClientError) -> Book {
        try await create("/books", fill, model: bookModel)
    }

    /// Changes a book: sends the fields `change` sets (`Changes` shows how). See `update(_:_:)` for
    /// libraries.
    public func update(_ book: Book, _ change: (inout Changes<Book>) -> Void) async throws(LibraryClientError) {
        var changes = Changes(model: book, storage: book.storage)
        change(&changes)
        try await update(changes)
    }

    /// Changes a library with a merge patch of the fields set in `change`, sent with `If-Match`.
    ///
    /// The model shows the new values at once and goes back to the server's values if the server
    /// refuses them. When the version the model knows is stale (`412`), the client reads the
    /// resource again: if every field this write changes still holds the value the change was
    /// made from, the write is sent again with the new version (another client changed other
    /// fields); otherwise it throws `.conflict` with the server's state, which the model now shows.
    public func update(_ library: Library, _ change: (inout Changes<Library>) -> Void) async throws(LibraryClientError)
    {
        var changes = Changes(model: library, storage: library.storage)
        change(&changes)
        try await update(changes)
    }

    /// Deletes a book (`If-Match` its version). A book already gone is marked deleted, not an error.
    public func delete(_ book: Book) async throws(LibraryClientError) {
        try await delete(book.storage, path: "/books/" + book.id.lowercased)
    }

    /// Deletes a library and its books (`If-Match` its version).
    public func delete(_ library: Library) async throws(LibraryClientError) {
        try await delete(library.storage, path: "/libraries/" + library.id.lowercased)
        for book in library.membership.members { book.storage.markDeleted() }
    }

    // MARK: Shared

    /// A `POST` of the fields `fill` sets on a scratch model, with an `Idempotency-Key`: sent again
    /// with the same key when no answer came, so a lost answer never creates a second resource.
    /// The answer fills the identity map's model of the new id.
    private func create<Model: StoredModel>(
        _ path: String, _ fill: (inout Changes<Model>) -> Void, model: (UUID) -> Model
    ) async throws(LibraryClientError) -> Model {
        let scratch = Model(id: UUID(), client: nil)
        var changes = Changes(model: scratch, storage: scratch.storage)
        fill(&changes)
        let (id, json) = try await post(path, changes)
        let created = model(id)
        created.storage.applyFromAnswer(json, since: created.storage.streamStamps)
        return created
    }

    private func post<Model>(_ path: String, _ changes: Changes<Model>) async throws(LibraryClientError) -> (
        UUID, [String: JSONValue]
    ) {
        guard changes.readOnly.isEmpty else { throw Self.readOnlyError(changes.readOnly) }
        let body = JSONValue(object: Dictionary(uniqueKeysWithValues: changes.values.map { ($0.name, JSONValue($1)) }))
        let key = UUID().uuidString.lowercased()
        var attempt = 0
        while true {
            attempt += 1
            do throws(LibraryClientError) {
                let answer = try await send(.POST, path, json: body, headers: [("Idempotency-Key", key)])
                guard answer.status == 201, let json = answer.json?.members,
                    let id = json["id"]?.string.flatMap(UUID.init(uuidString:))
                else { throw answer.error }
                return (id, json)
            } catch .transport(let reason) {
                guard attempt < 4 else { throw .transport(reason) }
                try? await Task.sleep(for: .milliseconds(100 << attempt))
            }
        }
    }

    /// How many times one write is sent while other clients' writes of other fields keep making
    /// the version it carries stale.
    static let staleVersionAttempts = 8

    /// An awaited write: queued behind the model's write in flight, if any (one at a time per
    /// model), and sent with the values set meanwhile.
    private func update<Model>(_ changes: Changes<Model>) async throws(LibraryClientError) {
        guard changes.readOnly.isEmpty else { throw Self.readOnlyError(changes.readOnly) }
        guard !changes.values.isEmpty else { return }
        let storage = changes.storage
        let error = await withCheckedContinuation { storage.queue(changes.values, waiter: $0, client: self) }
        if let error { throw error }
    }

    /// Sends a model's queued writes, one at a time, until none is left or a conflict holds them.
    func sendWrites<Field>(of storage: ModelStorage<Field>) {
        guard let first = storage.takeWrite() else { return }
        Task {
            var next: (values: [Field: FieldValue], known: [Field: FieldValue?])? = first
            while let write = next {
                let (error, unconfirmed) = await patch(write.values, known: write.known, storage: storage)
                storage.finishWrite(error, unconfirmed: unconfirmed)
                next = storage.takeWrite()
            }
        }
    }

    /// One merge patch with `If-Match`: nil when written (with the fields its answer did not set),
    /// or why not. When the version the model knows is stale (`412`), the client reads the
    /// resource again: if every field this write changes still holds the value it was made from
    /// (`known`), it is sent again with the new version (another client changed other fields), up
    /// to `staleVersionAttempts` times in all while others keep writing; otherwise it is a
    /// `.conflict` with the server's state, which the model now has.
    private func patch<Field>(
        _ values: [Field: FieldValue], known: [Field: FieldValue?], storage: ModelStorage<Field>
    ) async -> (LibraryClientError?, unconfirmed: Set<Field>) {
        do throws(LibraryClientError) {
            if storage.knownVersion == nil { try await refresh(storage, path: storage.path) }
            let body = JSONValue(object: Dictionary(uniqueKeysWithValues: values.map { ($0.name, JSONValue($1)) }))
            for attempt in 1...Self.staleVersionAttempts {
                let stamps = storage.streamStamps
                var headers: [(String, String)] = []
                if let version = storage.knownVersion { headers.append(("If-Match", "\"\(version)\"")) }
                let answer = try await send(
                    .PATCH, storage.path, json: body, contentType: "application/merge-patch+json", headers: headers)
                switch answer.status {
                case 200:
                    return (nil, storage.applyFromAnswer(answer.json?.members ?? [:], since: stamps))
                case 412:
                    let current = try await refresh(storage, path: storage.path)
                    let untouched = values.keys.allSatisfy { current.values[$0.name] == known[$0] ?? nil }
                    guard attempt < Self.staleVersionAttempts, untouched else {
                        return (.conflict(current: current, detail: answer.error.detail), [])
                    }
                case 404:
                    storage.markDeleted()
                    return (answer.error, [])
                default:
                    return (answer.error, [])
                }
            }
            return (nil, [])
        } catch {
            return (error, [])
        }
    }

    private func delete<Field>(_ storage: ModelStorage<Field>, path: String) async throws(LibraryClientError) {
        if storage.knownVersion == nil { try await refresh(storage, path: path) }
        var headers: [(String, String)] = []
        if let version = storage.knownVersion { headers.append(("If-Match", "\"\(version)\"")) }
        let answer = try await send(.DELETE, path, headers: headers)
        switch answer.status {
        case 204, 404: storage.markDeleted()
        case 412:
            let current = try await refresh(storage, path: path)
            throw .conflict(current: current, detail: answer.error.detail)
        default: throw answer.error
        }
    }

    /// Reads the resource again into its model; its state as the server sent it.
    @discardableResult
    func refresh<Field>(_ storage: ModelStorage<Field>, path: String) async throws(LibraryClientError)
        -> ResourceState
    {
        let stamps = storage.streamStamps
        let answer = try await send(.GET, path)
        guard answer.status == 200, let json = answer.json?.members else {
            if answer.status == 404 { storage.markDeleted() }
            throw answer.error
        }
        storage.applyFromAnswer(json, since: stamps)
        return ResourceState(values: json.compactMapValues(\.fieldValue))
    }

    private static func readOnlyError(_ names: [String]) -> LibraryClientError {
        .validation(names.map { .init(field: $0, message: "is not a field a client writes") })
    }
}

extension LibraryClientError {
    /// The server's words for the error.
    public var detail: String {
        switch self {
        case .notFound(let detail), .unauthorized(let detail), .forbidden(let detail), .transport(let detail): detail
        case .conflict(_, let detail), .unavailable(_, let detail), .rejected(_, let detail): detail
        case .validation(let problems): problems.map { "\($0.field) \($0.message)" }.joined(separator: "; ")
        }
    }
}
