import AsyncHTTPClient
import Foundation
import LibraryModel
import Observation

/// A client of library-server whose `Book` and `Library` models stay live.
///
/// Every model a client hands out is the one instance for its id (a weak identity map: views that
/// show the same book share it). Reading a model's property is demand for that field; the client
/// keeps one `POST /events` stream whose watches name exactly the fields read of the models still
/// held, and moves it to a new watch set a few milliseconds after demand changes (kept watches
/// resume where they were, new ones get their snapshot: nothing lost, nothing applied twice).
/// The stream reconnects by itself with backoff and jitter, resuming after the last frame; its
/// state is `connection`, observable like the models.
///
/// Main-actor isolated: models change on the main actor, where views read them.
@MainActor
@Observable
public final class LibraryClient {
    /// The stream's state, for a UI to show.
    public enum ConnectionState: Sendable, Equatable {
        /// Nothing is demanded, so no stream is open.
        case idle
        /// A stream is being opened (or moved to new watches) and not every watch is on it yet.
        case connecting
        /// The stream is open and every demanded watch is on it.
        case live
        /// The last attempt failed; the next is at `nextAttempt`.
        case offline(nextAttempt: Date, reason: String)
    }

    /// The stream's state.
    public internal(set) var connection: ConnectionState = .idle

    @ObservationIgnored let apiToken: String?
    @ObservationIgnored let readToken: String?
    /// The app's token provider, when it gave one (signed tokens, `--jwt-keys`).
    @ObservationIgnored nonisolated let tokens: TokenSource?
    /// Where requests go: the server over HTTP, or an in-memory backend.
    @ObservationIgnored nonisolated let transport: any ClientTransport
    @ObservationIgnored var books: [UUID: WeakBox<Book>] = [:]
    @ObservationIgnored var libraryModels: [UUID: WeakBox<Library>] = [:]
    @ObservationIgnored var collections: [String: WeakBox<BookCollection>] = [:]
    /// The live list of libraries, while someone holds it.
    @ObservationIgnored var libraryList: WeakBox<LibraryList>?
    /// The live side: the open stream, its watches, where it is.
    @ObservationIgnored var live = LiveState()
    /// Models' deinits report here, so that demand that ended reaches the stream.
    @ObservationIgnored nonisolated let releases: AsyncStream<Void>.Continuation
    @ObservationIgnored private var releaseTask: Task<Void, Never>?
    /// The stream's task, for the deinit (which is not on the main actor) to cancel.
    @ObservationIgnored nonisolated let lifetime = StreamLifetime()

    /// How long demand changes gather before the stream moves to the new watch set.
    @ObservationIgnored public var demandBatching: Duration = .milliseconds(5)
    /// A stream silent for this long (the server sends a keep-alive at least every 15 s) is taken
    /// for a dead connection and replaced.
    @ObservationIgnored public var silenceTimeout: Duration = .seconds(45)
    /// The longest wait between reconnection attempts.
    @ObservationIgnored public var maximumBackoff: Duration = .seconds(30)
    /// With a token provider: how long before the stream's token expires the client asks the
    /// provider for a new one and hands it to the open stream (`POST /events/{streamId}`), which
    /// then lives on; at most a third of the token's lifetime. Zero: never ahead; the stream ends
    /// with `expired` and the client reconnects with a new token, resuming after its last frame.
    @ObservationIgnored public var tokenRefreshLead: Duration = .seconds(60)
    /// For comparison only: watch every field of a resource any of whose fields is read (a
    /// whole-resource subscription, as clients without field demand make). Off by default.
    @ObservationIgnored public var watchesEveryField = false

    /// A client of the server at `baseURL`.
    ///
    /// - Parameters:
    ///   - baseURL: where the server answers, with any path prefix (`https://host/library/`).
    ///   - apiToken: the write token (`--api-token`); it grants reads too.
    ///   - readToken: the read token (`--read-token`), for reads and the stream.
    public convenience init(baseURL: URL, apiToken: String? = nil, readToken: String? = nil) {
        self.init(baseURL: baseURL, apiToken: apiToken, readToken: readToken, httpClient: .shared)
    }

    /// The same, on an `HTTPClient` of the app's (which the app shuts down after `close()`).
    public convenience init(baseURL: URL, apiToken: String? = nil, readToken: String? = nil, httpClient: HTTPClient) {
        self.init(
            transport: HTTPTransport(base: Self.base(of: baseURL), http: httpClient), apiToken: apiToken,
            readToken: readToken, tokens: nil)
    }

    /// A client of a server that takes signed tokens (`--jwt-keys`): `tokenProvider` returns
    /// the user's current token (a JWT from the app's identity provider). It is asked for the
    /// first request, again before the held token expires (`tokenRefreshLead`: the open stream
    /// is handed the new one and lives on), and once more when the server answers `401`. A
    /// stream that expires anyway reconnects with a new token and resumes after its last frame,
    /// losing no change.
    public convenience init(baseURL: URL, tokenProvider: @escaping @Sendable () async throws -> String) {
        self.init(baseURL: baseURL, tokenProvider: tokenProvider, httpClient: .shared)
    }

    /// The same, on an `HTTPClient` of the app's (which the app shuts down after `close()`).
    public convenience init(
        baseURL: URL, tokenProvider: @escaping @Sendable () async throws -> String, httpClient: HTTPClient
    ) {
        self.init(
            transport: HTTPTransport(base: Self.base(of: baseURL), http: httpClient), apiToken: nil, readToken: nil,
            tokens: TokenSource(tokenProvider))
    }

    /// A client of a backend in this process's memory, for SwiftUI previews and an app's tests:
    /// the same API and the same live behaviour as against a server (a value written anywhere
    /// shows in every model that reads it), with no server and no network.
    public convenience init(backend: InMemoryLibraryBackend) {
        self.init(transport: backend.transport, apiToken: nil, readToken: nil, tokens: nil)
    }

    private init(transport: any ClientTransport, apiToken: String?, readToken: String?, tokens: TokenSource?) {
        self.transport = transport
        self.apiToken = apiToken
        self.readToken = readToken
        self.tokens = tokens
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        releases = continuation
        releaseTask = Task { [weak self] in
            for await _ in stream { self?.demandChanged() }
        }
    }

    /// `baseURL`'s text without a trailing `/`: paths are appended to it.
    private static func base(of url: URL) -> String {
        var text = url.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    /// A client let go of ends its stream: the stream's tasks hold it weakly.
    deinit {
        releases.finish()
        lifetime.cancel()
    }

    /// Ends the stream and forgets every model's demand; models keep their last values.
    public func close() {
        live.closed = true
        live.generation += 1
        live.streamTask?.cancel()
        live.streamTask = nil
        releaseTask?.cancel()
        releases.finish()
        connection = .idle
    }

    // MARK: Reading

    /// The book, live for as long as it is held. Fetched (`GET /books/{id}`) unless a complete
    /// model of it is already held.
    public func book(id: UUID) async throws(LibraryClientError) -> Book {
        let book = bookModel(id)
        try await load(book.storage, path: "/books/" + id.lowercased)
        return book
    }

    /// The library, live for as long as it is held; its `books` arrive over the stream once read.
    public func library(id: UUID) async throws(LibraryClientError) -> Library {
        let library = libraryModel(id)
        try await load(library.storage, path: "/libraries/" + id.lowercased)
        return library
    }

    /// Fills a model from `GET path` unless it already holds every field; a 404 marks it deleted.
    private func load<Field>(_ storage: ModelStorage<Field>, path: String) async throws(LibraryClientError) {
        guard !storage.isComplete || storage.wasDeleted else { return }
        try await refresh(storage, path: path)
    }

    /// The live query of books whose filtered fields hold these values (the typed form, an
    /// argument per filterable field, is in Models.swift): one instance per filter while held.
    func books(matching filters: [BookField: FieldValue]) async throws(LibraryClientError) -> BookCollection {
        let key = BookCollection.key(filters)
        if let collection = collections[key]?.value { return collection }
        // One page with no fields checks the filters (a bad one is a 400 now, not a stream that fails).
        let check = try await send(.GET, key + (key.hasSuffix("?") ? "" : "&") + "limit=1&fields=id")
        guard check.status == 200 else { throw check.error }
        let collection = BookCollection(filters, client: self)
        collections[key] = WeakBox(collection)
        return collection
    }

    // MARK: Identity map

    func bookModel(_ id: UUID) -> Book {
        if let book = books[id]?.value { return book }
        let book = Book(id: id, client: self)
        books[id] = WeakBox(book)
        return book
    }

    func libraryModel(_ id: UUID) -> Library {
        if let library = libraryModels[id]?.value { return library }
        let library = Library(id: id, client: self)
        libraryModels[id] = WeakBox(library)
        return library
    }
}

/// The task of a client's stream, cancelled from the client's deinit.
final class StreamLifetime: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Void, Never>?

    func hold(_ task: Task<Void, Never>?) {
        lock.withLock { self.task = task }
    }

    func cancel() {
        lock.withLock { task }?.cancel()
    }
}

/// A weak reference, for the identity map and the stream's tasks.
struct WeakBox<Object: AnyObject> {
    weak var value: Object?
    init(_ value: Object) { self.value = value }
}

extension UUID {
    /// The canonical lowercase text the server uses.
    var lowercased: String { uuidString.lowercased() }
}
