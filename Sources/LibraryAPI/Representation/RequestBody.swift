import HTTPServer
import LibraryDomain

/// The members of a JSON object request body, read field by field with every problem collected,
/// so one 422 lists all of them.
struct RequestBody {
    private var members: [String: JSONValue] = [:]
    private(set) var errors: [FieldError] = []

    /// Checks the media type, parses the body and requires an object whose members are all
    /// `writable` or `readOnly` (read-only ones are ignored; any other is a 422).
    ///
    /// A body without `Content-Type` is refused too: a web page can send one cross-origin without
    /// a preflight (a `no-cors` fetch or a form), but it cannot send `application/json`.
    init(_ request: HTTPRequest, writable: [String], readOnly: [String]) throws(APIError) {
        for (key, value) in try Self.members(of: request) {
            if writable.contains(key) {
                members[key] = value
            } else if !readOnly.contains(key) {
                // A member name is client text of any length: name at most 100 characters of it.
                let name = key.count > 100 ? key.prefix(100) + "…" : key
                errors.append(FieldError(name, "is not a field of this resource"))
            }
        }
    }

    /// The members of a JSON object body: 415 for another media type, 400 for no body or one
    /// that is not JSON, 422 for JSON that is not an object.
    static func members(of request: HTTPRequest) throws(APIError) -> [(key: String, value: JSONValue)] {
        try checkMediaType(of: request)
        guard !request.body.isEmpty else { throw .badRequest("The request needs a JSON object body.") }
        let value: JSONValue
        do {
            value = try JSONParser.parse(request.body)
        } catch {
            throw .badRequest("The body is not valid JSON: \(error.message) at byte \(error.offset).")
        }
        guard case .object(let members) = value else {
            throw .invalid([FieldError("", "the body must be a JSON object, not \(value.typeName)")])
        }
        return members
    }

    /// A body must be JSON (415 otherwise); a header, so it is checked before the body is read.
    static func checkMediaType(of request: HTTPRequest) throws(APIError) {
        // No Content-Type is refused too: a browser's no-cors request can send a body without one.
        let contentType = request.headers["content-type"] ?? ""
        let mediaType =
            contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmedOWS().lowercased() } ?? ""
        guard mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
        else {
            throw APIError(
                .unsupportedMediaType,
                "unsupported-media-type",
                "The body must be JSON: send Content-Type: application/json."
            )
        }
    }

    /// Whether the body has this member at all.
    func has(_ name: String) -> Bool { members[name] != nil }

    /// A string member that must be present (full replacement or create).
    mutating func required(_ name: String) -> String {
        guard members[name] != nil else {
            errors.append(FieldError(name, "is required"))
            return ""
        }
        return string(name) ?? ""
    }

    /// A string member that may be absent (nil) but not null.
    mutating func string(_ name: String) -> String? {
        switch members[name] {
        case nil: return nil
        case .string(let value): return value
        case let other?:
            errors.append(FieldError(name, "must be a string, not \(other.typeName)"))
            return nil
        }
    }

    /// A nullable string member: nil when absent, `.some(nil)` for null.
    mutating func nullableString(_ name: String) -> String?? {
        switch members[name] {
        case nil: return nil
        case .null: return .some(nil)
        case .string(let value): return .some(value)
        case let other?:
            errors.append(FieldError(name, "must be a string or null, not \(other.typeName)"))
            return nil
        }
    }

    /// A nullable integer member: nil when absent, `.some(nil)` for null.
    mutating func nullableInteger(_ name: String) -> Int?? {
        switch members[name] {
        case nil: return nil
        case .null: return .some(nil)
        case let value? where value.integer != nil: return .some(value.integer)
        case let other?:
            errors.append(FieldError(name, "must be a whole number or null, not \(describe(other))"))
            return nil
        }
    }

    /// A boolean member that may be absent but not null.
    mutating func bool(_ name: String) -> Bool? {
        switch members[name] {
        case nil: return nil
        case .bool(let value): return value
        case let other?:
            errors.append(FieldError(name, "must be a boolean, not \(other.typeName)"))
            return nil
        }
    }

    /// Records a problem found by the caller.
    mutating func reject(_ error: FieldError) {
        errors.append(error)
    }

    /// Throws the collected errors as one 422.
    func check() throws(APIError) {
        if !errors.isEmpty { throw .invalid(errors) }
    }

    private func describe(_ value: JSONValue) -> String {
        if case .number = value { return "a fraction or out-of-range number" }
        return value.typeName
    }
}

/// Reading the domain's drafts and patches from request bodies.
enum BodyDecoding {
    static let libraryWritable = ["name", "address"]
    static let libraryReadOnly = ["id", "bookCount", "version", "createdAt", "updatedAt"]
    static let bookWritable = ["libraryId", "title", "author", "isbn", "publishedYear", "available"]
    static let bookReadOnly = ["id", "version", "createdAt", "updatedAt"]

    /// A whole library (POST, PUT): absent optional fields take their defaults.
    static func libraryDraft(_ request: HTTPRequest) throws(APIError) -> LibraryDraft {
        var body = try RequestBody(request, writable: libraryWritable, readOnly: libraryReadOnly)
        let draft = LibraryDraft(name: body.required("name"), address: body.nullableString("address") ?? nil)
        try body.check()
        return draft
    }

    static func libraryPatch(_ request: HTTPRequest) throws(APIError) -> LibraryPatch {
        var body = try RequestBody(request, writable: libraryWritable, readOnly: libraryReadOnly)
        let patch = LibraryPatch(name: body.string("name"), address: body.nullableString("address"))
        try body.check()
        return patch
    }

    /// A whole book (POST, PUT). `pathLibraryID` is the library of `POST /libraries/{id}/books`;
    /// a body that names another library there is a 422.
    static func bookDraft(_ request: HTTPRequest, pathLibraryID: String? = nil) throws(APIError) -> BookDraft {
        var body = try RequestBody(request, writable: bookWritable, readOnly: bookReadOnly)
        var libraryId = pathLibraryID ?? body.required("libraryId")
        if let pathLibraryID, body.has("libraryId") {
            let given = body.string("libraryId")
            if let given, Identifier.canonical(given) != pathLibraryID {
                body.reject(FieldError("libraryId", "must match the library in the path, or be left out"))
            }
        }
        libraryId = Identifier.canonical(libraryId) ?? libraryId
        let draft = BookDraft(
            libraryId: libraryId,
            title: body.required("title"),
            author: body.string("author") ?? "",
            isbn: body.nullableString("isbn") ?? nil,
            publishedYear: body.nullableInteger("publishedYear") ?? nil,
            available: body.bool("available") ?? true
        )
        try body.check()
        return draft
    }

    static func bookPatch(_ request: HTTPRequest) throws(APIError) -> BookPatch {
        var body = try RequestBody(request, writable: bookWritable, readOnly: bookReadOnly)
        var patch = BookPatch()
        patch.libraryId = body.string("libraryId").map { Identifier.canonical($0) ?? $0 }
        patch.title = body.string("title")
        patch.author = body.string("author")
        patch.isbn = body.nullableString("isbn")
        patch.publishedYear = body.nullableInteger("publishedYear")
        patch.available = body.bool("available")
        try body.check()
        return patch
    }
}
