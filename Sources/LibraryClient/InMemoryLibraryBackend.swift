import Foundation
import JSON
import LibraryModel
import NIOHTTP1
import Observation

/// A library-server in this process's memory, for SwiftUI previews and an app's unit tests:
/// `LibraryClient(backend: .sample())` has the client's whole API and its live behaviour, with no
/// server and no network.
///
/// It answers the requests the client makes as the server does: whole representations with
/// versions, merge patches with `If-Match` (a stale version is a `412`), `Idempotency-Key` on
/// `POST`, the field table's validation (kinds, lengths, ranges, ISBN checksums: a refused value is
/// the same `422`), `404` for what does not exist, and one `/events` stream per client whose
/// watches name the fields read. Its resources are observed with Observation, as the server's live
/// models are: a watch is told of a change only when a field it names changed, and its event
/// carries only those fields. So a value written anywhere (by the app's models, or by a test
/// through ``update(book:_:)``, standing for another user) shows in every model that reads it.
///
/// What it leaves out: there are no tokens (every request may read and write everything), no
/// sorted or searched lists, and no change log (a stream that opens again gets fresh snapshots,
/// which the API allows for a resume the server's history no longer holds). Main-actor isolated,
/// like the client.
@MainActor
public final class InMemoryLibraryBackend {
    /// How long each request waits before it is answered, to show loading and pending states
    /// in a preview. Zero by default.
    public var latency: Duration = .zero
    /// Every request the client made, `METHOD path` (with the query), oldest first.
    public private(set) var requestLog: [String] = []

    private var libraries: [UUID: StoredResource<LibraryField>] = [:]
    private var books: [UUID: StoredResource<BookField>] = [:]
    /// Every library's and every book's id, in creation order: what lists and live queries observe.
    let directory = Directory()
    private var seq = 0
    private var streams: [String: MemoryStream] = [:]
    private var answered: [String: (body: JSONValue?, answer: Answer)] = [:]

    /// An empty backend.
    public init() {}

    /// A backend holding a sample library of a few well-known books, for previews.
    public static func sample() -> InMemoryLibraryBackend {
        let backend = InMemoryLibraryBackend()
        do throws(LibraryClientError) {
            let library = try backend.addLibrary(name: "Central Library", address: "1 Library Square")
            let books: [(String, String, Int, Bool)] = [
                ("Dune", "Frank Herbert", 1965, true),
                ("Emma", "Jane Austen", 1815, false),
                ("The Left Hand of Darkness", "Ursula K. Le Guin", 1969, true),
                ("Middlemarch", "George Eliot", 1871, true),
                ("The Remains of the Day", "Kazuo Ishiguro", 1989, false),
            ]
            for (title, author, year, available) in books {
                try backend.addBook(
                    to: library, title: title, author: author, publishedYear: year, available: available)
            }
        } catch {
            preconditionFailure("the sample data is valid: \(error)")
        }
        return backend
    }

    /// The client's way in.
    nonisolated var transport: any ClientTransport { MemoryTransport(backend: self) }

    // MARK: Other users' writes

    /// Creates a library, as another user would; its id.
    @discardableResult
    public func addLibrary(name: String, address: String? = nil) throws(LibraryClientError) -> UUID {
        try created(.POST, "/libraries", ["name": .string(name), "address": JSONValue(FieldValue(address))])
    }

    /// Creates a book in `library`, as another user would; its id.
    @discardableResult
    public func addBook(
        to library: UUID, title: String, author: String = "", isbn: String? = nil, publishedYear: Int? = nil,
        available: Bool = true
    ) throws(LibraryClientError) -> UUID {
        try created(
            .POST, "/books",
            [
                "libraryId": .string(library.lowercased), "title": .string(title), "author": .string(author),
                "isbn": JSONValue(FieldValue(isbn)), "publishedYear": JSONValue(FieldValue(publishedYear)),
                "available": .bool(available),
            ])
    }

    /// Changes a book's fields, as another user would (a merge patch with no `If-Match`).
    public func update(book id: UUID, _ values: [BookField: FieldValue]) throws(LibraryClientError) {
        try expect(200, .PATCH, "/books/" + id.lowercased, Self.body(values))
    }

    /// Changes a library's fields, as another user would.
    public func update(library id: UUID, _ values: [LibraryField: FieldValue]) throws(LibraryClientError) {
        try expect(200, .PATCH, "/libraries/" + id.lowercased, Self.body(values))
    }

    /// Deletes a book, as another user would.
    public func delete(book id: UUID) throws(LibraryClientError) {
        try expect(204, .DELETE, "/books/" + id.lowercased, nil)
    }

    /// Deletes a library and its books, as another user would.
    public func delete(library id: UUID) throws(LibraryClientError) {
        try expect(204, .DELETE, "/libraries/" + id.lowercased, nil)
    }

    /// A book's stored fields (nil when there is no such book), for a test to check what was written.
    public func storedBook(_ id: UUID) -> [BookField: FieldValue]? { books[id]?.values }

    /// A library's stored fields (nil when there is no such library).
    public func storedLibrary(_ id: UUID) -> [LibraryField: FieldValue]? { libraries[id]?.values }

    /// Every library's id, in creation order.
    public var libraryIDs: [UUID] { directory.libraries }

    private func created(_ method: HTTPMethod, _ path: String, _ members: [String: JSONValue])
        throws(LibraryClientError) -> UUID
    {
        let answer = handle(TransportRequest(method: method, path: path, headers: [], body: JSONValue(object: members)))
        guard answer.status == 201, let id = answer.json?["id"]?.string.flatMap(UUID.init(uuidString:)) else {
            throw answer.error
        }
        return id
    }

    private func expect(_ status: Int, _ method: HTTPMethod, _ path: String, _ body: JSONValue?)
        throws(LibraryClientError)
    {
        let answer = handle(TransportRequest(method: method, path: path, headers: [], body: body))
        guard answer.status == status else { throw answer.error }
    }

    nonisolated private static func body<Field: ResourceField>(_ values: [Field: FieldValue]) -> JSONValue {
        JSONValue(object: Dictionary(uniqueKeysWithValues: values.map { ($0.name, JSONValue($1)) }))
    }

    // MARK: Requests

    /// A request of the client's, answered after `latency`.
    func answer(_ request: TransportRequest) async -> Answer {
        if latency > .zero { try? await Task.sleep(for: latency) }
        return handle(request)
    }

    /// Opens a stream of the client's, after `latency`.
    func openStream(_ request: TransportRequest) async -> StreamOpening {
        if latency > .zero { try? await Task.sleep(for: latency) }
        requestLog.append(request.method.rawValue + " " + request.path)
        guard request.path == "/events", let body = request.body, let names = body["watches"]?.array else {
            return .refused(Self.problem(400, "The body needs `watches`, an array of watch paths."))
        }
        var watches: [String: any MemoryWatch] = [:]
        for name in names {
            guard let text = name.string else { return .refused(Self.problem(400, "A watch is a string.")) }
            switch watch(text) {
            case .success(let watch): watches[text] = watch
            case .failure(let refusal): return .refused(refusal)
            }
        }
        let id = UUID().lowercased
        let (items, sink) = AsyncStream<StreamItem>.makeStream()
        let stream = MemoryStream(id: id, sink: sink)
        streams[id] = stream
        sink.onTermination = { [weak self] _ in Task { @MainActor in self?.streams[id] = nil } }
        // No change log: every watch starts with its snapshot, resumed or not.
        stream.add(watches, seq: seq)
        return .opened(streamID: id, items: items, stop: { sink.finish() })
    }

    /// Every route the client uses, as the server answers it.
    func handle(_ request: TransportRequest) -> Answer {
        requestLog.append(request.method.rawValue + " " + request.path)
        let (path, query) = Self.split(request.path)
        let parts = path.split(separator: "/").map(String.init)
        switch (request.method, parts.count, parts.first) {
        case (.GET, 1, "books"): return list(query)
        case (.GET, 1, "libraries"): return libraryList(query)
        case (.POST, 1, "books"): return idempotent(request) { create(book: request.body, in: nil) }
        case (.POST, 1, "libraries"): return idempotent(request) { create(library: request.body) }
        case (.POST, 3, "libraries") where parts[2] == "books":
            guard let library = UUID(uuidString: parts[1]), libraries[library] != nil else {
                return Self.problem(404, "No library has the id \(parts[1]).")
            }
            return idempotent(request) { create(book: request.body, in: library) }
        case (.POST, 2, "events"): return changeWatches(of: parts[1], request.body)
        case (_, 2, "books"):
            guard let id = UUID(uuidString: parts[1]), let book = books[id] else {
                return Self.problem(404, "No book has the id \(parts[1]).")
            }
            return resource(book, request)
        case (_, 2, "libraries"):
            guard let id = UUID(uuidString: parts[1]), let library = libraries[id] else {
                return Self.problem(404, "No library has the id \(parts[1]).")
            }
            return resource(library, request)
        default:
            return Self.problem(404, "The in-memory backend has no route \(request.method.rawValue) \(path).")
        }
    }

    /// GET, PATCH or DELETE of one resource.
    private func resource<Field>(_ record: StoredResource<Field>, _ request: TransportRequest) -> Answer {
        switch request.method {
        case .GET: return Self.representation(record, status: 200)
        case .PATCH, .DELETE:
            if let stale = precondition(record, request) { return stale }
            if request.method == .DELETE {
                remove(record)
                commit()
                return Answer(status: 204, headers: [], body: [])
            }
            switch Self.validated(request.body, of: Field.self, whole: false) {
            case .failure(let refusal): return refusal
            case .success(let values):
                if let moved = Field(named: BookField.library.name).flatMap({ values[$0] }),
                    let refusal = checkLibrary(moved)
                {
                    return refusal
                }
                write(values, to: record)
                commit()
                return Self.representation(record, status: 200)
            }
        default:
            return Self.problem(405, "Only GET, PATCH and DELETE here.")
        }
    }

    /// `If-Match`: nil when it holds (or is absent), else the `412`.
    private func precondition<Field>(_ record: StoredResource<Field>, _ request: TransportRequest) -> Answer? {
        guard let value = request.headers.first(where: { $0.0.lowercased() == "if-match" })?.1, value != "*" else {
            return nil
        }
        let version = record.values[Field(named: "version")!]?.int ?? 0
        guard value != "\"\(version)\"" else { return nil }
        return Self.problem(412, "The resource is at version \(version), not \(value).")
    }

    /// A book's library must exist: nil when it does, else the `422`.
    private func checkLibrary(_ value: FieldValue?) -> Answer? {
        guard let text = value?.string else { return nil }
        guard let id = UUID(uuidString: text), libraries[id] != nil else {
            return Self.invalid([("libraryId", "names no library")])
        }
        return nil
    }

    private func create(book body: JSONValue?, in library: UUID?) -> Answer {
        var body = body
        if let library, case .object(var members)? = body {
            members.removeAll { $0.key == BookField.library.name }
            members.append((BookField.library.name, .string(library.lowercased)))
            body = .object(members)
        }
        switch Self.validated(body, of: BookField.self, whole: true) {
        case .failure(let refusal): return refusal
        case .success(let values):
            if let refusal = checkLibrary(values[.libraryId]) { return refusal }
            let book = StoredResource<BookField>(id: UUID(), values: values, now: Self.now())
            books[book.id] = book
            directory.books.append(book.id)
            join(book, libraryOf: values[.libraryId])
            commit()
            return Self.representation(book, status: 201)
        }
    }

    private func create(library body: JSONValue?) -> Answer {
        switch Self.validated(body, of: LibraryField.self, whole: true) {
        case .failure(let refusal): return refusal
        case .success(var values):
            values[.bookCount] = .int(0)
            let library = StoredResource<LibraryField>(id: UUID(), values: values, now: Self.now())
            libraries[library.id] = library
            directory.libraries.append(library.id)
            commit()
            return Self.representation(library, status: 201)
        }
    }

    /// A `POST` with an `Idempotency-Key` seen before gets the first answer (the same key with
    /// another body is a `422`).
    private func idempotent(_ request: TransportRequest, _ make: () -> Answer) -> Answer {
        guard let key = request.headers.first(where: { $0.0.lowercased() == "idempotency-key" })?.1 else {
            return make()
        }
        if let earlier = answered[key] {
            return earlier.body == request.body
                ? earlier.answer : Self.invalid([("", "the Idempotency-Key was used with another body")])
        }
        let answer = make()
        answered[key] = (request.body, answer)
        return answer
    }

    private func write<Field>(_ values: [Field: FieldValue], to record: StoredResource<Field>) {
        if let book = record as? StoredResource<BookField>,
            let moved = (values as? [BookField: FieldValue])?[.libraryId],
            moved != book.values[.libraryId]
        {
            leave(book)
            book.set(.libraryId, moved)
            join(book, libraryOf: moved)
        }
        record.write(values, now: Self.now())
    }

    private func join(_ book: StoredResource<BookField>, libraryOf value: FieldValue?) {
        guard let id = value?.string.flatMap(UUID.init(uuidString:)), let library = libraries[id] else { return }
        library.members.append(book.id)
        library.set(.bookCount, .int(library.members.count))
    }

    private func leave(_ book: StoredResource<BookField>) {
        guard let id = book.values[.libraryId]?.string.flatMap(UUID.init(uuidString:)), let library = libraries[id]
        else { return }
        library.members.removeAll { $0 == book.id }
        library.set(.bookCount, .int(library.members.count))
    }

    private func remove<Field>(_ record: StoredResource<Field>) {
        if let book = record as? StoredResource<BookField> {
            leave(book)
            books[book.id] = nil
            directory.books.removeAll { $0 == book.id }
            book.markDeleted()
        } else if let library = record as? StoredResource<LibraryField> {
            for id in library.members {
                books[id]?.markDeleted()
                books[id] = nil
            }
            let gone = Set(library.members)
            directory.books.removeAll { gone.contains($0) }
            libraries[library.id] = nil
            directory.libraries.removeAll { $0 == library.id }
            library.markDeleted()
        }
    }

    /// A write is committed: one more change in the sequence, and each stream's watches whose
    /// observed fields changed send one frame.
    private func commit() {
        seq += 1
        for stream in streams.values { stream.flush(seq: seq) }
    }

    // MARK: Lists

    /// `GET /books` with the filters a live query uses, and `limit`; `fields` lists what a page holds.
    private func list(_ query: [(String, String)]) -> Answer {
        var limit = 50
        var filter = BookFilter()
        var fields: [BookField]?
        for (name, value) in query {
            switch name {
            case "limit":
                guard let number = Int(value), (1...500).contains(number) else {
                    return Self.problem(400, "limit must be a whole number from 1 to 500.")
                }
                limit = number
            case "fields":
                fields = value.split(separator: ",").compactMap { BookField(named: $0) }
            default:
                switch filter.set(name, value) {
                case .success: break
                case .failure(let refusal): return refusal
                }
            }
        }
        if let library = filter.libraryId, libraries[library] == nil {
            return Self.problem(404, "No library has the id \(library.lowercased).")
        }
        let items = directory.books.compactMap { books[$0] }.filter { filter.matches($0) }.prefix(limit)
        return Self.page(items.map { $0.json(fields: fields) })
    }

    private func libraryList(_ query: [(String, String)]) -> Answer {
        for (name, _) in query where name != "limit" && name != "fields" {
            return Self.problem(400, "\(name) is not a parameter the in-memory backend's library list takes.")
        }
        return Self.page(directory.libraries.compactMap { libraries[$0]?.json(fields: nil) })
    }

    nonisolated private static func page(_ items: [JSONValue]) -> Answer {
        jsonAnswer(200, .object([("items", .array(items)), ("nextCursor", .null)]))
    }

    // MARK: Streams

    /// `POST /events/{streamId}`: `add` and `remove` watches of an open stream (an empty body, a
    /// new token on the server, changes nothing here).
    private func changeWatches(of id: String, _ body: JSONValue?) -> Answer {
        guard let stream = streams[id] else { return Self.problem(404, "No open stream has the id \(id).") }
        var added: [String: any MemoryWatch] = [:]
        for name in body?["add"]?.array ?? [] {
            guard let text = name.string else { return Self.problem(400, "A watch is a string.") }
            switch watch(text) {
            case .success(let watch): added[text] = watch
            case .failure(let refusal): return refusal
            }
        }
        for name in body?["remove"]?.array ?? [] { if let text = name.string { stream.remove(text) } }
        stream.add(added, seq: seq)
        return Answer(status: 204, headers: [], body: [])
    }

    /// The watch a path names, in the client's spelling (`WatchText`): a book's fields, a
    /// library's fields and membership, a live query's members, every library.
    private func watch(_ text: String) -> Result<any MemoryWatch, Answer> {
        let (path, query) = Self.split(text)
        let parts = path.split(separator: "/").map(String.init)
        let fieldNames = query.first { $0.0 == "fields" }?.1.split(separator: ",").map(String.init) ?? []
        let refused = Self.problem(400, "watch \"\(text)\": not a watch the in-memory backend serves.")
        let missing = Self.problem(404, "watch \"\(text)\": no such resource.")
        switch (parts.count, parts.first) {
        case (2, "books"):
            let fields = fieldNames.compactMap { BookField(named: $0) }.filter { $0 != .id }
            guard fields.count == fieldNames.filter({ $0 != "id" }).count else { return .failure(refused) }
            guard let id = UUID(uuidString: parts[1]), let book = books[id] else { return .failure(missing) }
            return .success(ResourceWatch(book, fields: fields, members: nil))
        case (2, "libraries"):
            let members = fieldNames.contains("books")
            let own = fieldNames.filter { $0 != "books" && $0 != "id" }
            let fields = own.compactMap { LibraryField(named: $0) }
            guard fields.count == own.count else { return .failure(refused) }
            guard let id = UUID(uuidString: parts[1]), let library = libraries[id] else { return .failure(missing) }
            return .success(ResourceWatch(library, fields: fields, members: members ? library : nil))
        case (1, "books"):
            var filter = BookFilter()
            for (name, value) in query where name != "fields" {
                guard case .success = filter.set(name, value) else { return .failure(refused) }
            }
            let query = filter
            return .success(
                ListWatch { [unowned self] in
                    self.directory.books.compactMap { self.books[$0] }.filter { query.matches($0) }.map(\.id)
                })
        case (1, "libraries"):
            return .success(ListWatch { [unowned self] in self.directory.libraries })
        default:
            return .failure(refused)
        }
    }

    // MARK: Representations

    private static func representation<Field>(_ record: StoredResource<Field>, status: Int) -> Answer {
        var answer = jsonAnswer(status, record.json(fields: nil))
        answer.headers.append(("ETag", "\"\(record.values[Field(named: "version")!]?.int ?? 0)\""))
        return answer
    }

    nonisolated static func jsonAnswer(_ status: Int, _ json: JSONValue) -> Answer {
        Answer(status: status, headers: [("Content-Type", "application/json")], body: json.encoded)
    }

    nonisolated static func problem(_ status: Int, _ detail: String, errors: [(String, String)]? = nil) -> Answer {
        var members: [(key: String, value: JSONValue)] = [
            (ProblemMember.type.rawValue, .string("about:blank")),
            (ProblemMember.summary.rawValue, .string(HTTPResponseStatus(statusCode: status).reasonPhrase)),
            (ProblemMember.status.rawValue, .number(String(status))), (ProblemMember.detail.rawValue, .string(detail)),
        ]
        if let errors {
            members.append(
                (
                    ProblemMember.errors.rawValue,
                    .array(
                        errors.map {
                            .object([
                                (ProblemMember.field.rawValue, .string($0.0)),
                                (ProblemMember.message.rawValue, .string($0.1)),
                            ])
                        })
                ))
        }
        return Answer(
            status: status, headers: [("Content-Type", "application/problem+json")],
            body: JSONValue.object(members).encoded
        )
    }

    nonisolated static func invalid(_ errors: [(String, String)]) -> Answer {
        problem(422, "The body has invalid fields.", errors: errors)
    }

    private static func now() -> String { Date.format(Date()) }

    /// A path and its query's decoded name-value pairs.
    nonisolated static func split(_ text: String) -> (path: String, query: [(String, String)]) {
        guard let mark = text.firstIndex(of: "?") else { return (text, []) }
        let query = text[text.index(after: mark)...].split(separator: "&").map { pair -> (String, String) in
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            return (parts.first ?? "", parts.count > 1 ? parts[1] : "")
        }
        return (String(text[..<mark]), query)
    }
}

extension InMemoryLibraryBackend {
    /// A body's fields, checked against the field table as the server checks them: a member that
    /// is no field, a value of the wrong kind, a text too long or a number out of range, an
    /// invalid UUID or ISBN; for a whole representation (`POST`), a required field left out.
    /// Read-only members are ignored, as the server ignores them.
    nonisolated static func validated<Field: ResourceField>(_ body: JSONValue?, of _: Field.Type, whole: Bool)
        -> Result<[Field: FieldValue], Answer>
    {
        guard case .object(let members)? = body else {
            return .failure(invalid([("", "the body must be a JSON object")]))
        }
        var values: [Field: FieldValue] = [:]
        var errors: [(String, String)] = []
        for (name, json) in members {
            guard let field = Field(named: name) else {
                errors.append((name, "is not a field of this resource"))
                continue
            }
            let row = field.descriptor
            guard row.writable else { continue }
            switch check(json, row) {
            case .success(let value): values[field] = value
            case .failure(let message): errors.append((name, message.text))
            }
        }
        if whole {
            for field in Field.writable where values[field] == nil {
                if let value = field.descriptor.defaultValue {
                    values[field] = value
                } else if !errors.contains(where: { $0.0 == field.name }) {
                    errors.append((field.name, "is required"))
                }
            }
        }
        return errors.isEmpty ? .success(values) : .failure(invalid(errors))
    }

    struct Refusal: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    nonisolated private static func check(_ json: JSONValue, _ row: FieldDescriptor) -> Result<FieldValue, Refusal> {
        if json == .null {
            return row.nullable ? .success(.null) : .failure(Refusal("must not be null"))
        }
        let value: FieldValue
        switch (row.kind, json) {
        case (.text, .string(let text)), (.identifier, .string(let text)), (.timestamp, .string(let text)):
            value = .string(row.kind == .identifier ? text.lowercased() : text)
        case (.integer, _) where json.integer != nil: value = .int(json.integer!)
        case (.boolean, .bool(let flag)): value = .bool(flag)
        default:
            let kinds: [FieldKind: String] = [
                .text: "a string", .identifier: "a UUID", .integer: "a whole number", .boolean: "a boolean",
                .timestamp: "a timestamp",
            ]
            let expected = (kinds[row.kind] ?? "\(row.kind)") + (row.nullable ? " or null" : "")
            return .failure(Refusal("must be \(expected), not \(json.typeName)"))
        }
        switch (row.rule, value) {
        case (.length(let bounds)?, .string(let text)) where !bounds.contains(text.unicodeScalars.count):
            return .failure(Refusal("must be \(bounds.lowerBound) to \(bounds.upperBound) characters long"))
        case (.range(let bounds)?, .int(let number)) where !bounds.contains(number):
            return .failure(Refusal("must be between \(bounds.lowerBound) and \(bounds.upperBound)"))
        case (.uuid?, .string(let text)) where UUID(uuidString: text) == nil:
            return .failure(Refusal("must be a UUID"))
        case (.isbn?, .string(let text)) where !isValidISBN(text):
            return .failure(Refusal("must be a valid ISBN-10 or ISBN-13 (hyphens allowed, checksum checked)"))
        default: return .success(value)
        }
    }

    /// ISBN-10 (the last character may be `X`) or ISBN-13, hyphens allowed, checksum checked.
    nonisolated static func isValidISBN(_ text: String) -> Bool {
        let characters = Array(text.filter { $0 != "-" })
        func digit(_ character: Character) -> Int? { character.wholeNumberValue.flatMap { $0 < 10 ? $0 : nil } }
        switch characters.count {
        case 10:
            var sum = 0
            for (index, character) in characters.enumerated() {
                guard let value = index == 9 && (character == "X" || character == "x") ? 10 : digit(character) else {
                    return false
                }
                sum += (10 - index) * value
            }
            return sum % 11 == 0
        case 13:
            var sum = 0
            for (index, character) in characters.enumerated() {
                guard let value = digit(character), character.isASCII else { return false }
                sum += (index % 2 == 0 ? 1 : 3) * value
            }
            return sum % 10 == 0
        default: return false
        }
    }
}

/// A refusal, carried through a `Result` to the answer it becomes.
extension Answer: Error {}

/// The client's requests, handed to the backend on the main actor.
struct MemoryTransport: ClientTransport {
    let backend: InMemoryLibraryBackend

    func send(_ request: TransportRequest) async throws(LibraryClientError) -> Answer {
        await backend.answer(request)
    }

    func openStream(_ request: TransportRequest) async throws(LibraryClientError) -> StreamOpening {
        await backend.openStream(request)
    }
}

/// The filters of a live query (`libraryId`, `author`, `available`).
@MainActor
struct BookFilter {
    var libraryId: UUID?
    var author: String?
    var available: Bool?

    mutating func set(_ name: String, _ value: String) -> Result<Void, Answer> {
        switch name {
        case BookField.libraryId.name:
            guard let id = UUID(uuidString: value) else {
                return .failure(InMemoryLibraryBackend.problem(400, "libraryId must be a UUID."))
            }
            libraryId = id
        case BookField.author.name: author = value
        case BookField.available.name:
            guard let flag = Bool(value) else {
                return .failure(InMemoryLibraryBackend.problem(400, "available must be true or false."))
            }
            available = flag
        default:
            return .failure(
                InMemoryLibraryBackend.problem(400, "\(name) is not a parameter the in-memory backend's lists take."))
        }
        return .success(())
    }

    /// Whether the book matches; reading its filtered fields is what a live query observes.
    func matches(_ book: StoredResource<BookField>) -> Bool {
        let values = (book[.libraryId], book[.author], book[.available])
        if let libraryId, values.0 != .string(libraryId.lowercased) { return false }
        if let author, values.1 != .string(author) { return false }
        if let available, values.2 != .bool(available) { return false }
        return true
    }
}

/// Every library's and every book's id, in creation order, observed by the live lists.
@MainActor
@Observable
final class Directory {
    var libraries: [UUID] = []
    var books: [UUID] = []
}

/// One stored library or book: its fields, each observed on its own, and for a library its
/// members, in the order they joined.
@MainActor
final class StoredResource<Field: ResourceField>: Observable {
    private let registrar = ObservationRegistrar()
    let id: UUID
    private(set) var values: [Field: FieldValue]
    private var deletedState = false
    private var memberIDs: [UUID] = []

    init(id: UUID, values: [Field: FieldValue], now: String) {
        self.id = id
        var values = values
        values[Field(named: "id")!] = .string(id.lowercased)
        values[Field(named: "version")!] = .int(1)
        values[Field(named: "createdAt")!] = .string(now)
        values[Field(named: "updatedAt")!] = .string(now)
        self.values = values
    }

    /// A field's value, observed.
    subscript(field: Field) -> FieldValue? {
        registrar.access(self, keyPath: \.[field])
        return values[field]
    }

    /// Sets a field; observers of it are told only when its value changes.
    func set(_ field: Field, _ value: FieldValue) {
        guard values[field] != value else { return }
        registrar.withMutation(of: self, keyPath: \.[field]) { values[field] = value }
    }

    /// A write: its values, one more version and the time of the write.
    func write(_ changes: [Field: FieldValue], now: String) {
        for (field, value) in changes { set(field, value) }
        set(Field(named: "version")!, .int((values[Field(named: "version")!]?.int ?? 0) + 1))
        set(Field(named: "updatedAt")!, .string(now))
    }

    var isDeleted: Bool {
        registrar.access(self, keyPath: \.isDeleted)
        return deletedState
    }

    func markDeleted() {
        registrar.withMutation(of: self, keyPath: \.isDeleted) { deletedState = true }
    }

    /// A library's books, observed.
    var members: [UUID] {
        get {
            registrar.access(self, keyPath: \.members)
            return memberIDs
        }
        set { registrar.withMutation(of: self, keyPath: \.members) { memberIDs = newValue } }
    }

    /// Its JSON: `fields` and `id` (every field when nil), read without observing.
    func json(fields: [Field]?) -> JSONValue {
        let chosen = fields.map { [Field(named: "id")!] + $0.filter { $0.name != "id" } } ?? Array(Field.allCases)
        return .object(chosen.map { ($0.name, JSONValue(values[$0] ?? .null)) })
    }
}

/// One stream of a client's: its watches, and the frames it sends.
@MainActor
final class MemoryStream {
    let id: String
    private let sink: AsyncStream<StreamItem>.Continuation
    private var watches: [String: any MemoryWatch] = [:]

    init(id: String, sink: AsyncStream<StreamItem>.Continuation) {
        self.id = id
        self.sink = sink
    }

    /// New watches: one frame of their snapshots.
    func add(_ added: [String: any MemoryWatch], seq: Int) {
        guard !added.isEmpty else { return }
        watches.merge(added) { _, new in new }
        let entries = added.keys.sorted().map { (watch: $0, event: "snapshot", data: added[$0]!.snapshot()) }
        sink.yield(.frame(seq: seq, entries: entries))
    }

    func remove(_ watch: String) { watches[watch] = nil }

    /// After a commit: one frame of every watch that Observation said changed.
    func flush(seq: Int) {
        var entries: [(watch: String, event: String, data: JSONValue)] = []
        for (text, watch) in watches.sorted(by: { $0.key < $1.key }) {
            guard let (event, data) = watch.changes() else { continue }
            entries.append((text, event, data))
            if event == "delete" { watches[text] = nil }
        }
        if !entries.isEmpty { sink.yield(.frame(seq: seq, entries: entries)) }
    }
}

/// A watch of a stream: its snapshot, and after a commit its change (nil: nothing it observes
/// changed).
@MainActor
protocol MemoryWatch: AnyObject {
    func snapshot() -> JSONValue
    func changes() -> (event: String, data: JSONValue)?
}

/// A watch of a book's or a library's fields (and a library's membership): each field is
/// observed on its own, so Observation names exactly the fields that changed.
@MainActor
final class ResourceWatch<Field: ResourceField>: MemoryWatch {
    private let record: StoredResource<Field>
    private let fields: [Field]
    private let library: StoredResource<LibraryField>?
    private var changed: Set<Field> = []
    private var deleted = false
    private var membersChanged = false
    private var shownMembers: [UUID] = []

    init(_ record: StoredResource<Field>, fields: [Field], members library: StoredResource<LibraryField>?) {
        self.record = record
        self.fields = fields
        self.library = library
        for field in fields { observe(field) }
        observeExistence()
        if library != nil { observeMembers() }
    }

    private func observe(_ field: Field) {
        withObservationTracking {
            _ = record[field]
        } onChange: { [weak self] in
            MainActor.assumeIsolated { _ = self?.changed.insert(field) }
        }
    }

    private func observeExistence() {
        withObservationTracking {
            _ = record.isDeleted
        } onChange: { [weak self] in
            MainActor.assumeIsolated { self?.deleted = true }
        }
    }

    private func observeMembers() {
        guard let library else { return }
        withObservationTracking {
            _ = library.members
        } onChange: { [weak self] in
            MainActor.assumeIsolated { self?.membersChanged = true }
        }
    }

    func snapshot() -> JSONValue {
        guard case .object(var object) = record.json(fields: fields) else { return .null }
        if let library {
            shownMembers = library.members
            object.append(("books", .array(shownMembers.map { .object([("id", .string($0.lowercased))]) })))
        }
        return .object(object)
    }

    func changes() -> (event: String, data: JSONValue)? {
        if deleted { return ("delete", .object([("id", .string(record.id.lowercased))])) }
        var object: [(key: String, value: JSONValue)] = []
        for field in fields where changed.contains(field) {
            object.append((field.name, JSONValue(record.values[field] ?? .null)))
            observe(field)
        }
        changed = []
        if membersChanged, let library {
            membersChanged = false
            observeMembers()
            let now = library.members
            let before = Set(shownMembers)
            let after = Set(now)
            var delta: [(key: String, value: JSONValue)] = []
            let added = now.filter { !before.contains($0) }
            let removed = shownMembers.filter { !after.contains($0) }
            if !added.isEmpty {
                delta.append(("added", .array(added.map { .object([("id", .string($0.lowercased))]) })))
            }
            if !removed.isEmpty { delta.append(("removed", .array(removed.map { .string($0.lowercased) }))) }
            shownMembers = now
            if !delta.isEmpty { object.append(("books", .object(delta))) }
        }
        guard !object.isEmpty else { return nil }
        return ("change", .object([("id", .string(record.id.lowercased))] + object))
    }
}

/// A watch of a list's members (a live query's books, or every library): the list is read
/// under observation, so any change of what decides membership (a filtered field, a book or
/// library created or deleted) marks it, and the change is the difference.
@MainActor
final class ListWatch: MemoryWatch {
    private let members: () -> [UUID]
    private var shown: [UUID] = []
    private var touched = false

    init(members: @escaping () -> [UUID]) {
        self.members = members
    }

    /// The members, read under observation.
    private func observed() -> [UUID] {
        withObservationTracking(members) { [weak self] in
            MainActor.assumeIsolated { self?.touched = true }
        }
    }

    func snapshot() -> JSONValue {
        shown = observed()
        return .object([("items", .array(shown.map { .object([("id", .string($0.lowercased))]) }))])
    }

    func changes() -> (event: String, data: JSONValue)? {
        guard touched else { return nil }
        touched = false
        let now = observed()
        let before = Set(shown)
        let after = Set(now)
        let added = now.filter { !before.contains($0) }
        let removed = shown.filter { !after.contains($0) }
        shown = now
        var delta: [(key: String, value: JSONValue)] = []
        if !added.isEmpty { delta.append(("added", .array(added.map { .object([("id", .string($0.lowercased))]) }))) }
        if !removed.isEmpty { delta.append(("removed", .array(removed.map { .string($0.lowercased) }))) }
        return delta.isEmpty ? nil : ("change", .object(delta))
    }
}
