import HTTPServer
import JSON
import LibraryDomain

/// The members of a JSON object request body, read field by field with every problem collected,
/// so one 422 lists all of them.
package struct RequestBody {
    private var members: [String: JSONValue] = [:]
    private(set) var errors: [FieldError] = []

    /// Checks the media type, parses the body and requires an object whose members are all
    /// fields of a resource with `Field`s: read-only ones are ignored, any other member is a 422.
    ///
    /// A body without `Content-Type` is refused too: a web page can send one cross-origin without
    /// a preflight (a `no-cors` fetch or a form), but it cannot send `application/json`.
    package init<Field: ResourceField>(_ request: HTTPRequest, of _: Field.Type) throws(APIError) {
        for (key, value) in try Self.members(of: request) {
            if let field = Field(named: key) {
                if Field.table[field.rawValue].writable { members[key] = value }
            } else {
                // A member name is client text of any length: name at most 100 characters of it.
                let name = key.count > 100 ? key.prefix(100) + "…" : key
                errors.append(FieldError(name, "is not a field of this resource"))
            }
        }
    }

    /// The members of a JSON object body: 415 for another media type, 400 for no body or one
    /// that is not JSON, 422 for JSON that is not an object.
    package static func members(of request: HTTPRequest) throws(APIError) -> [(key: String, value: JSONValue)] {
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
    package static func checkMediaType(of request: HTTPRequest) throws(APIError) {
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
    package func has(_ name: String) -> Bool { members[name] != nil }

    /// A string member that may be absent (nil) but not null.
    package mutating func string(_ name: String) -> String? {
        switch members[name] {
        case nil: return nil
        case .string(let value): return value
        case let other?:
            errors.append(FieldError(name, "must be a string, not \(other.typeName)"))
            return nil
        }
    }

    /// A nullable string member: nil when absent, `.some(nil)` for null.
    package mutating func nullableString(_ name: String) -> String?? {
        switch members[name] {
        case nil: return nil
        case .null: return .some(nil)
        case .string(let value): return .some(value)
        case let other?:
            errors.append(FieldError(name, "must be a string or null, not \(other.typeName)"))
            return nil
        }
    }

    /// An integer member: nil when absent; null only where `nullable`.
    package mutating func integer(_ name: String, nullable: Bool) -> FieldValue? {
        switch members[name] {
        case nil: return nil
        case .null where nullable: return .null
        case let value? where value.integer != nil: return .int(value.integer!)
        case let other?:
            let expected = nullable ? "a whole number or null" : "a whole number"
            errors.append(FieldError(name, "must be \(expected), not \(describe(other))"))
            return nil
        }
    }

    /// A nullable boolean member: nil when absent.
    package mutating func nullableBool(_ name: String) -> FieldValue? {
        switch members[name] {
        case nil: return nil
        case .null: return .null
        case .bool(let value): return .bool(value)
        case let other?:
            errors.append(FieldError(name, "must be a boolean or null, not \(other.typeName)"))
            return nil
        }
    }

    /// A boolean member that may be absent but not null.
    package mutating func bool(_ name: String) -> Bool? {
        switch members[name] {
        case nil: return nil
        case .bool(let value): return value
        case let other?:
            errors.append(FieldError(name, "must be a boolean, not \(other.typeName)"))
            return nil
        }
    }

    /// Records a problem found by the caller.
    package mutating func reject(_ error: FieldError) {
        errors.append(error)
    }

    /// Throws the collected errors as one 422.
    package func check() throws(APIError) {
        if !errors.isEmpty { throw .invalid(errors) }
    }

    private func describe(_ value: JSONValue) -> String {
        if case .number = value { return "a fraction or out-of-range number" }
        return value.typeName
    }
}

extension RequestBody {
    /// The member for `field`, checked against the field's kind and nullability: nil when absent or
    /// of another kind (then noted). A UUID is made canonical (lowercase).
    package mutating func value<Field: ResourceField>(_ field: Field) -> FieldValue? {
        let name = field.name
        let value: FieldValue?
        // The row's kind and nullability read in place, not by copying the row.
        switch (Field.table[field.rawValue].kind, Field.table[field.rawValue].nullable) {
        case (.identifier, false):
            value = string(name).map { .string(Identifier.canonical($0) ?? $0) }
        case (.identifier, true):
            value = nullableString(name).map { FieldValue($0.map { Identifier.canonical($0) ?? $0 }) }
        case (.text, false), (.timestamp, false): value = string(name).map(FieldValue.string)
        case (.text, true), (.timestamp, true): value = nullableString(name).map(FieldValue.init)
        case (.integer, let nullable): value = integer(name, nullable: nullable)
        case (.boolean, false): value = bool(name).map(FieldValue.bool)
        case (.boolean, true): value = nullableBool(name)
        }
        return value
    }

    /// Every writable field the body has, each checked as `value(_:)` does.
    package mutating func values<Field: ResourceField>(of _: Field.Type) -> [Field: FieldValue] {
        var values: [Field: FieldValue] = [:]
        for field in Field.writable { values[field] = value(field) }
        return values
    }
}

/// Reading the domain's drafts and patches from request bodies, by the field table.
package enum BodyDecoding {
    /// A whole representation (POST, PUT): absent fields take the table's defaults, and one without
    /// a default is required; `preset` values stand for absent fields (the library in a path).
    package static func draft<Draft: FieldDraft>(
        _ request: HTTPRequest, _: Draft.Type, preset: [Draft.Field: FieldValue] = [:]
    ) throws(APIError) -> Draft {
        var body = try RequestBody(request, of: Draft.Field.self)
        var values: [Draft.Field: FieldValue] = [:]
        for field in Draft.Field.writable {
            if body.has(field.name) {
                values[field] = body.value(field)
            } else if field.descriptor.defaultValue == nil && preset[field] == nil {
                body.reject(FieldError(field.name, "is required"))
            }
        }
        for (field, value) in preset {
            if let given = values[field], given != value {
                body.reject(FieldError(field.name, "must match the library in the path, or be left out"))
            }
            values[field] = value
        }
        try body.check()
        guard let draft = Draft(defaultsAnd: values) else {
            throw .invalid(
                Draft.Field.writable.filter { values[$0] == nil }.map { FieldError($0.name, "is required") })
        }
        return draft
    }

    /// A merge patch: the writable fields the body has.
    package static func patch<Field: ResourceField>(_ request: HTTPRequest, _: Field.Type) throws(APIError) -> Patch<
        Field
    > {
        var body = try RequestBody(request, of: Field.self)
        let patch = Patch(body.values(of: Field.self))
        try body.check()
        return patch
    }

    package static func libraryDraft(_ request: HTTPRequest) throws(APIError) -> LibraryDraft {
        try draft(request, LibraryDraft.self)
    }

    package static func libraryPatch(_ request: HTTPRequest) throws(APIError) -> LibraryPatch {
        try patch(request, LibraryField.self)
    }

    /// A whole book. `pathLibraryID` is the library of `POST /libraries/{id}/books`; a body that
    /// names another library there is a 422.
    package static func bookDraft(_ request: HTTPRequest, pathLibraryID: String? = nil) throws(APIError) -> BookDraft {
        try draft(request, BookDraft.self, preset: pathLibraryID.map { [BookField.library: .string($0)] } ?? [:])
    }

    package static func bookPatch(_ request: HTTPRequest) throws(APIError) -> BookPatch {
        try patch(request, BookField.self)
    }
}
