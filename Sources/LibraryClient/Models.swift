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

/// A book, live: each property shows the server's value and changes when the server's does.
///
/// Reading a property (in a SwiftUI `body`, or in any `withObservationTracking` scope) is what
/// subscribes to it: the client watches exactly the fields read of the books still held, over its
/// one `/events` stream. A field nobody reads is never sent. One instance per id per client.
/// Main-actor isolated, as views are: the client applies every change on the main actor.
@MainActor
public final class Book: LiveModel, StoredModel, Hashable {
    public typealias Field = BookField
    public nonisolated let id: UUID
    let storage: ModelStorage<BookField>

    /// Tells the client that demand may have ended (a deinit is not on the main actor).
    nonisolated let released: AsyncStream<Void>.Continuation?

    init(id: UUID, client: LibraryClient?) {
        self.id = id
        storage = ModelStorage(id: id, client: client)
        released = client?.releases
    }

    deinit { released?.yield() }

    public var libraryId: UUID { storage.read(.libraryId) }
    public var title: String { storage.read(.title) }
    public var author: String { storage.read(.author) }
    public var isbn: String? { storage.read(.isbn) }
    public var publishedYear: Int? { storage.read(.publishedYear) }
    public var available: Bool { storage.read(.available) }
    public var version: Int { storage.read(.version) }
    public var createdAt: Date { storage.read(.createdAt) }
    public var updatedAt: Date { storage.read(.updatedAt) }

    /// Whether the server deleted the book. Reading it watches the book's existence only.
    public var isDeleted: Bool { storage.isDeleted }

    /// The value of any field by the table, read (and demanded) like the properties.
    public subscript(field: BookField) -> FieldValue { storage.read(field) }

    public nonisolated static func == (lhs: Book, rhs: Book) -> Bool { lhs === rhs }
    public nonisolated func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A library, live, with its books (`books` is the live membership, in the server's order).
@MainActor
public final class Library: LiveModel, StoredModel, Hashable {
    public typealias Field = LibraryField
    public nonisolated let id: UUID
    let storage: ModelStorage<LibraryField>
    let membership: Membership

    nonisolated let released: AsyncStream<Void>.Continuation?

    init(id: UUID, client: LibraryClient?) {
        self.id = id
        storage = ModelStorage(id: id, client: client)
        membership = Membership(client: client)
        released = client?.releases
    }

    deinit { released?.yield() }

    public var name: String { storage.read(.name) }
    public var address: String? { storage.read(.address) }
    public var bookCount: Int { storage.read(.bookCount) }
    public var version: Int { storage.read(.version) }
    public var createdAt: Date { storage.read(.createdAt) }
    public var updatedAt: Date { storage.read(.updatedAt) }

    /// The library's books, as live `Book` models shared with every other view. Reading it
    /// watches the membership; reading a book's field watches that field of that book.
    public var books: [Book] { membership.read() }

    /// Whether the server deleted the library.
    public var isDeleted: Bool { storage.isDeleted }

    public subscript(field: LibraryField) -> FieldValue { storage.read(field) }

    public nonisolated static func == (lhs: Library, rhs: Library) -> Bool { lhs === rhs }
    public nonisolated func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A live query: the books matching a filter, entering and leaving as the server says.
@MainActor
public final class BookCollection: Observable {
    /// The filters, as the server applies them (`GET /books?libraryId=&author=&available=`).
    public nonisolated let libraryId: UUID?
    public nonisolated let author: String?
    public nonisolated let available: Bool?
    let membership: Membership
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

    /// `/books?` and each filter, in the table's order.
    nonisolated static func key(_ filters: [BookField: FieldValue]) -> String { WatchText.books(filters) }
}

extension LibraryClient {
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
