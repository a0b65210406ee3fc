import Foundation
import LibraryModel
import Observation

/// A model the client keeps live: `Book` or `Library`.
@MainActor
public protocol LiveModel: AnyObject, Observable, Identifiable where ID == UUID {
    /// The field table of the resource.
    associatedtype Field: ResourceField
    nonisolated var id: UUID { get }
}

/// What the client needs of its own models: their storage, and a way to make one.
@MainActor
protocol StoredModel: LiveModel {
    var storage: ModelStorage<Field> { get }
    init(id: UUID, client: LibraryClient?)
}

/// Where a model's server state stands, for a view to show a placeholder, the values, a
/// "deleted" note or an error.
public enum LoadState: Sendable, Equatable {
    /// Not arrived yet (the fields show placeholders: `""`, `0`, `false`, `nil`).
    case loading
    /// The server's state has arrived (from a read, a write's answer or the stream).
    case loaded
    /// The server deleted the resource (or the user's rights no longer reach it).
    case deleted
    /// Not arrived, and the client's stream is offline: why, until it reconnects.
    case failed(String)
}

/// A write of a model's own values that met someone else's change of the same fields.
public struct WriteConflict: Sendable, Equatable {
    /// How `resolveConflict` ends a conflict.
    public enum Choice: Sendable {
        /// Write this model's values over the server's.
        case keepMine
        /// Show the server's values, dropping this model's unwritten ones.
        case takeTheirs
    }
    /// The resource as the server has it now.
    public let theirs: ResourceState
    /// The values this model set and did not get written, by field name.
    public let mine: ResourceState
}

/// What `Book` and `Library` share: the id, the fields' storage, and the state of the server's
/// copy and of this client's writes, each observed like a field.
@MainActor
public class LiveResource<Field: ResourceField>: Hashable {
    /// The resource's id: one model per id per client.
    public nonisolated let id: UUID
    let storage: ModelStorage<Field>
    /// Tells the client that demand may have ended (a deinit is not on the main actor).
    nonisolated let released: AsyncStream<Void>.Continuation?

    init(id: UUID, path: String, client: LibraryClient?) {
        self.id = id
        storage = ModelStorage(id: id, path: path, client: client)
        released = client?.releases
    }

    deinit { released?.yield() }

    /// The value of any field by the table, read (and demanded) like the properties.
    public subscript(field: Field) -> FieldValue { storage.read(field) }

    /// Whether the server deleted the resource (or the user's rights no longer reach it).
    /// Reading it watches the resource's existence only.
    public var isDeleted: Bool { storage.isDeleted }

    /// Where its server state stands: `.loading` until it arrives, then `.loaded`; `.deleted`;
    /// `.failed` while it has not arrived and the stream is offline. Observed; reading it
    /// demands the resource's existence, so it arrives.
    public var loadState: LoadState { storage.loadState }

    /// Whether a value set on the model is not yet written (in flight, queued, or held by a
    /// conflict). Observed like a field.
    public var hasPendingWrites: Bool { storage.hasPendingWrites }

    /// A write that found the fields it changes changed by someone else since; the model shows
    /// its own values until `resolveConflict`.
    public var conflict: WriteConflict? { storage.conflict }

    /// Why the latest write was refused (its fields are back to the server's values); nil once
    /// one is written.
    public var writeError: LibraryClientError? { storage.writeError }

    /// Ends a conflict: `.keepMine` writes this model's values over the server's, `.takeTheirs`
    /// shows the server's (values set since the conflict are written either way).
    public func resolveConflict(_ choice: WriteConflict.Choice) {
        storage.resolveConflict(keepingMine: choice == .keepMine)
    }

    public nonisolated static func == (lhs: LiveResource, rhs: LiveResource) -> Bool { lhs === rhs }
    public nonisolated func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A book, live: each property shows the server's value and changes when the server's does.
///
/// Reading a property (in a SwiftUI `body`, or in any `withObservationTracking` scope) is what
/// subscribes to it: the client watches exactly the fields read of the books still held, over its
/// one `/events` stream. A field nobody reads is never sent. One instance per id per client.
///
/// Setting a property a client writes (`book.title = "Dune"`, or `$book.title` bound with
/// `@Bindable`) shows the value at once and writes it with `If-Match`: at most one write per
/// model is in flight, and values set meanwhile (each field's newest) go in the next one, so
/// typing sends a few PATCHes and never shows an older value after a newer one. The server's
/// answer and the stream's event are applied once, in either order. A write that meets someone
/// else's change of the same field stops at `conflict` (the model keeps showing its own values)
/// until `resolveConflict` picks a side; one the server refuses (`422`, `403`, …) rolls its fields
/// back to the server's values and says why in `writeError`. `hasPendingWrites` says whether any
/// set value is not yet written. `LibraryClient.update` queues the same way, for a write to await.
/// `Library`'s `name` and `address` are settable alike.
/// Main-actor isolated, as views are: the client applies every change on the main actor.
@MainActor
public final class Book: LiveResource<BookField>, LiveModel, StoredModel {
    public typealias Field = BookField

    init(id: UUID, client: LibraryClient?) {
        super.init(id: id, path: "/books/" + id.lowercased, client: client)
    }

    // The fields a client writes are settable (`book.title = "Dune"`, `$book.title` with
    // `@Bindable`): see `LiveModel` for what a set does.
    /// The library the book belongs to; setting it moves the book.
    public var libraryId: UUID {
        get { storage.read(.libraryId) }
        set { storage.set(.libraryId, newValue.fieldValue) }
    }
    /// The title, 1 to 500 characters.
    public var title: String {
        get { storage.read(.title) }
        set { storage.set(.title, newValue.fieldValue) }
    }
    /// The author, up to 300 characters (`""` when unknown).
    public var author: String {
        get { storage.read(.author) }
        set { storage.set(.author, newValue.fieldValue) }
    }
    /// An ISBN-10 or ISBN-13 (hyphens allowed, checksum checked by the server), or nil.
    public var isbn: String? {
        get { storage.read(.isbn) }
        set { storage.set(.isbn, newValue.fieldValue) }
    }
    /// The year of publication (-9999 to 9999), or nil.
    public var publishedYear: Int? {
        get { storage.read(.publishedYear) }
        set { storage.set(.publishedYear, newValue.fieldValue) }
    }
    /// Whether the book is on the shelf (not checked out).
    public var available: Bool {
        get { storage.read(.available) }
        set { storage.set(.available, newValue.fieldValue) }
    }
    /// The server's version of the book, one more with each write (`If-Match` sends it).
    public var version: Int { storage.read(.version) }
    /// When the book was created.
    public var createdAt: Date { storage.read(.createdAt) }
    /// When the book was last written.
    public var updatedAt: Date { storage.read(.updatedAt) }

}

/// A library, live, with its books (`books` is the live membership, in the server's order).
@MainActor
public final class Library: LiveResource<LibraryField>, LiveModel, StoredModel {
    public typealias Field = LibraryField
    let membership: Membership<Book>

    init(id: UUID, client: LibraryClient?) {
        membership = Membership(client: client)
        super.init(id: id, path: "/libraries/" + id.lowercased, client: client)
    }

    /// The name, 1 to 200 characters.
    public var name: String {
        get { storage.read(.name) }
        set { storage.set(.name, newValue.fieldValue) }
    }
    /// The address, up to 500 characters, or nil.
    public var address: String? {
        get { storage.read(.address) }
        set { storage.set(.address, newValue.fieldValue) }
    }
    /// How many books the library holds, kept by the server (reading it does not load `books`).
    public var bookCount: Int { storage.read(.bookCount) }
    /// The server's version of the library, one more with each write.
    public var version: Int { storage.read(.version) }
    /// When the library was created.
    public var createdAt: Date { storage.read(.createdAt) }
    /// When the library was last written.
    public var updatedAt: Date { storage.read(.updatedAt) }

    /// The library's books, as live `Book` models shared with every other view. Reading it
    /// watches the membership; reading a book's field watches that field of that book.
    public var books: [Book] { membership.read() }

    /// Whether `books` has arrived from the server: an empty `books` then means an empty library.
    public var hasLoadedBooks: Bool { membership.isLoaded }

}

/// A live query: the books matching a filter, entering and leaving as the server says.
@MainActor
public final class BookCollection: Observable {
    /// The filters, as the server applies them (`GET /books?libraryId=&author=&available=`).
    public nonisolated let libraryId: UUID?
    /// The author the books must have, if the query names one.
    public nonisolated let author: String?
    /// Whether the books must be available (or checked out), if the query says.
    public nonisolated let available: Bool?
    let membership: Membership<Book>
    /// The watch path, which is also the collection's identity in the client.
    nonisolated let key: String

    init(_ filters: [BookField: FieldValue], client: LibraryClient?) {
        libraryId = filters[.libraryId]?.string.flatMap { UUID(uuidString: $0) }
        author = filters[.author]?.string
        available = filters[.available]?.bool
        membership = Membership(client: client)
        key = Self.key(filters)
        released = client?.releases
    }

    nonisolated let released: AsyncStream<Void>.Continuation?

    deinit { released?.yield() }

    /// The matching books, in the server's order (insertion), each a live `Book`.
    public var items: [Book] { membership.read() }

    /// Whether the first list has arrived: an empty `items` then means nothing matches.
    public var isLoaded: Bool { membership.isLoaded }

    /// `/books?` and each filter, in the table's order.
    nonisolated static func key(_ filters: [BookField: FieldValue]) -> String { WatchText.books(filters) }
}

/// Every library the client's user may read, live: libraries enter and leave as the server says
/// (`GET /libraries/events`), so an app starts from nothing rather than a library's id.
@MainActor
public final class LibraryList: Observable {
    let membership: Membership<Library>
    nonisolated let released: AsyncStream<Void>.Continuation?

    init(client: LibraryClient?) {
        membership = Membership(client: client)
        released = client?.releases
    }

    deinit { released?.yield() }

    /// The libraries, in the server's order (creation), each a live `Library`. Reading it watches
    /// the list; reading a library's field watches that field. Sort by name in the view
    /// (`items.sorted { $0.name < $1.name }`): the server keeps windows of sorted lists for books only.
    public var items: [Library] { membership.read() }

    /// Whether the list has arrived: an empty `items` then means no library.
    public var isLoaded: Bool { membership.isLoaded }
}

extension LibraryClient {
    /// The live list of libraries: one per client while someone holds it.
    public var libraries: LibraryList {
        if let list = libraryList?.value { return list }
        let list = LibraryList(client: self)
        libraryList = WeakBox(list)
        return list
    }

    /// A live query of books (`GET /books/events` with these filters): its `items` enter and leave
    /// as the server decides. The filters are checked by the server when the stream opens.
    public func books(libraryId: UUID? = nil, author: String? = nil, available: Bool? = nil)
        async throws(LibraryClientError) -> BookCollection
    {
        var filters: [BookField: FieldValue] = [:]
        filters[.libraryId] = libraryId.map { .string($0.uuidString.lowercased()) }
        filters[.author] = author.map(FieldValue.string)
        filters[.available] = available.map(FieldValue.bool)
        return try await books(matching: filters)
    }
}

/// Query-component encoding: everything but unreserved characters.

/// The changes a write makes, written with the model's own property names:
/// `client.createBook { $0.libraryId = id; $0.title = "Dune" }`,
/// `client.update(book) { $0.title = "Dune" }`. Only fields set here are sent (a merge patch).
@MainActor
@dynamicMemberLookup
public struct Changes<Model: LiveModel> {
    let model: Model
    let storage: ModelStorage<Model.Field>
    private(set) var values: [Model.Field: FieldValue] = [:]
    /// Properties set that are not fields a client writes (reported as a validation error).
    private(set) var readOnly: [String] = []

    init(model: Model, storage: ModelStorage<Model.Field>) {
        self.model = model
        self.storage = storage
    }

    /// A property of the model, by its own name: reads the value this write sets (or the model's),
    /// and a set adds the field to the write (a field a client does not write is reported as a
    /// validation error).
    public subscript<T: FieldConvertible>(dynamicMember keyPath: KeyPath<Model, T>) -> T {
        get {
            guard let field = storage.field(of: keyPath, in: model) else { return model[keyPath: keyPath] }
            return (values[field] ?? storage[field]).flatMap(T.init(fieldValue:)) ?? T.placeholder
        }
        set {
            guard let field = storage.field(of: keyPath, in: model), field.descriptor.writable else {
                readOnly.append(storage.field(of: keyPath, in: model)?.name ?? "\(keyPath)")
                return
            }
            values[field] = newValue.fieldValue
        }
    }
}
