/// The one table of the fields of a library and a book: their JSON names, their columns, their
/// kinds, which a client writes and which a collection filters by. The server's JSON and events,
/// the test that holds the table against the migrations and openapi.yaml, and the Swift client's
/// models read it here; adding a field starts with a row below.

/// What a field holds, as JSON carries it.
public enum FieldKind: Sendable, Hashable {
    /// A UUID in its canonical lowercase text.
    case identifier
    case text
    case integer
    case boolean
    /// An RFC 3339 UTC timestamp with milliseconds.
    case timestamp
}

/// What a writable value must satisfy beyond its kind (the server checks it; openapi.yaml states it).
public enum FieldRule: Sendable, Hashable {
    /// Text whose length, in Unicode scalars (code points, as JSON Schema's `maxLength` counts),
    /// lies in the range.
    case length(ClosedRange<Int>)
    /// A whole number in the range.
    case range(ClosedRange<Int>)
    /// A UUID (any case on input; stored canonical, lowercase).
    case uuid
    /// An ISBN-10 or ISBN-13, hyphens allowed, checksum checked.
    case isbn
}

/// One row of the field table.
public struct FieldDescriptor: Sendable, Hashable {
    /// The name in JSON bodies, `fields=` lists and events.
    public let name: String
    /// The column in both engines' tables (and in the change log's).
    public let column: String
    public let kind: FieldKind
    /// Whether JSON may carry `null`.
    public let nullable: Bool
    /// Whether a client sets it in a body (the others are the server's).
    public let writable: Bool
    /// Whether a collection of books is filtered by it (`/books?author=…`).
    public let filterable: Bool
    /// Whether a list is sorted by it (`/books?sort=title`, `sort=-title`).
    public let sortable: Bool
    /// Whether every write of the resource sets it, by itself: the version (one more) and the time
    /// of the write.
    public let stamped: Bool
    /// The value a whole representation (POST, PUT) takes when it leaves a writable field out;
    /// nil makes the field required there.
    public let defaultValue: FieldValue?
    /// What a written value must satisfy, beyond its kind.
    public let rule: FieldRule?

    init(
        _ name: String, column: String, _ kind: FieldKind, nullable: Bool = false, writable: Bool = false,
        filterable: Bool = false, sortable: Bool = false, stamped: Bool = false,
        default defaultValue: FieldValue? = nil, rule: FieldRule? = nil
    ) {
        self.name = name
        self.column = column
        self.kind = kind
        self.nullable = nullable
        self.writable = writable
        self.filterable = filterable
        self.sortable = sortable
        self.stamped = stamped
        self.defaultValue = defaultValue ?? (nullable ? .null : nil)
        self.rule = rule
    }
}

/// A field of a resource: its enum case stands for a row of the table, and its raw value is the
/// row's position, so looking a field's row up costs an index, not a hash.
public protocol ResourceField: CaseIterable, Hashable, Sendable, RawRepresentable where RawValue == Int {
    /// Every field's row, in the order of the cases.
    static var table: [FieldDescriptor] { get }
    /// Every field's name, in the order of the cases (`table`'s, read without copying a row).
    static var names: [String] { get }
    /// The fields a client writes, in table order.
    static var writable: [Self] { get }
    /// The fields every write sets by itself (the version and the update time), in table order.
    static var stamped: [Self] { get }
}

extension ResourceField {
    /// The field's row of the table. (Inlinable, as the other members here: they run for every
    /// field of every record the server reads or writes, and must be specialized where used.)
    @inlinable public var descriptor: FieldDescriptor { Self.table[rawValue] }

    /// The name in JSON bodies, `fields=` lists and events.
    @inlinable public var name: String { Self.names[rawValue] }

    /// The field named `name` in JSON, if there is one.
    @inlinable public init?(named name: some StringProtocol) {
        guard let position = Self.names.firstIndex(where: { $0.utf8.elementsEqual(name.utf8) }) else {
            return nil
        }
        self.init(rawValue: position)
    }
}

/// The fields of a library's representation, in the order they are written.
public enum LibraryField: Int, ResourceField {
    case id, name, address, bookCount, version, createdAt, updatedAt

    public static let table = allCases.map(\.row)
    public static let names = table.map(\.name)
    public static let writable = allCases.filter { table[$0.rawValue].writable }
    public static let stamped = allCases.filter { table[$0.rawValue].stamped }

    private var row: FieldDescriptor {
        switch self {
        case .id: FieldDescriptor("id", column: "id", .identifier)
        case .name:
            FieldDescriptor("name", column: "name", .text, writable: true, sortable: true, rule: .length(1...200))
        case .address:
            FieldDescriptor("address", column: "address", .text, nullable: true, writable: true, rule: .length(0...500))
        case .bookCount: FieldDescriptor("bookCount", column: "book_count", .integer, sortable: true)
        case .version: FieldDescriptor("version", column: "version", .integer, stamped: true)
        case .createdAt: FieldDescriptor("createdAt", column: "created_at", .timestamp, sortable: true)
        case .updatedAt:
            FieldDescriptor("updatedAt", column: "updated_at", .timestamp, sortable: true, stamped: true)
        }
    }
}

/// The fields of a book's representation, in the order they are written.
public enum BookField: Int, ResourceField {
    case id, libraryId, title, author, isbn, publishedYear, available, version, createdAt, updatedAt

    public static let table = allCases.map(\.row)
    public static let names = table.map(\.name)
    public static let writable = allCases.filter { table[$0.rawValue].writable }
    public static let stamped = allCases.filter { table[$0.rawValue].stamped }
    /// The fields a collection of books is filtered by, in table order.
    public static let filterable = allCases.filter { table[$0.rawValue].filterable }
    /// The field that names the library a book belongs to: the relation that membership, a
    /// library's `bookCount` and a book's move are about. Everything that follows a book's
    /// library names it through this (and `BookRecord.library`), never by the field's own name.
    public static let library = BookField.libraryId

    private var row: FieldDescriptor {
        switch self {
        case .id: FieldDescriptor("id", column: "id", .identifier)
        case .libraryId:
            FieldDescriptor(
                "libraryId", column: "library_id", .identifier, writable: true, filterable: true, rule: .uuid)
        case .title:
            FieldDescriptor("title", column: "title", .text, writable: true, sortable: true, rule: .length(1...500))
        case .author:
            FieldDescriptor(
                "author", column: "author", .text, writable: true, filterable: true, sortable: true,
                default: .string(""), rule: .length(0...300))
        case .isbn: FieldDescriptor("isbn", column: "isbn", .text, nullable: true, writable: true, rule: .isbn)
        case .publishedYear:
            FieldDescriptor(
                "publishedYear", column: "published_year", .integer, nullable: true, writable: true, sortable: true,
                rule: .range(-9999...9999))
        case .available:
            FieldDescriptor(
                "available", column: "available", .boolean, writable: true, filterable: true, default: .bool(true))
        case .version: FieldDescriptor("version", column: "version", .integer, stamped: true)
        case .createdAt: FieldDescriptor("createdAt", column: "created_at", .timestamp, sortable: true)
        case .updatedAt:
            FieldDescriptor("updatedAt", column: "updated_at", .timestamp, sortable: true, stamped: true)
        }
    }
}

/// A field's value, as JSON and events carry it.
public enum FieldValue: Sendable, Hashable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null

    @inlinable public init(_ value: String?) { self = value.map(FieldValue.string) ?? .null }
    @inlinable public init(_ value: Int?) { self = value.map(FieldValue.int) ?? .null }

    @inlinable public var string: String? { if case .string(let value) = self { value } else { nil } }
    @inlinable public var int: Int? { if case .int(let value) = self { value } else { nil } }
    @inlinable public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }

    /// The text of a value that must be text: a value of another kind here is a programming error
    /// (bodies are checked against the table's kinds before a value is made).
    @inlinable public var requiredString: String {
        guard case .string(let value) = self else { preconditionFailure("\(self) is not text") }
        return value
    }

    /// The whole number of a value that must be one.
    @inlinable public var requiredInt: Int {
        guard case .int(let value) = self else { preconditionFailure("\(self) is not a whole number") }
        return value
    }

    /// The truth value of a value that must be one.
    @inlinable public var requiredBool: Bool {
        guard case .bool(let value) = self else { preconditionFailure("\(self) is not a boolean") }
        return value
    }
}
