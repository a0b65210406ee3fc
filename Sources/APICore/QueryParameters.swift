import LibraryDomain

/// The decoded query string. Parameters this API does not define are ignored (so cache-busting
/// parameters work); a defined one given twice, or a bad escape anywhere, is a 400.
package struct QueryParameters: Sendable {
    private var values: [String: String] = [:]
    private var repeated: Set<String> = []
    /// Every `watch` given, in order: the one parameter that may repeat (`GET /events`).
    package private(set) var watches: [String] = []

    package init(_ query: Substring?) throws(APIError) {
        guard let query, !query.isEmpty else { return }
        // Split on the UTF-8 bytes: `&` and `=` are ASCII, and splitting `Character`s is slow.
        for pair in query.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecode(Substring(parts[0]), plusAsSpace: true),
                let value = percentDecode(parts.count > 1 ? Substring(parts[1]) : "", plusAsSpace: true)
            else { throw .badRequest("The query string has an invalid percent-encoding.") }
            if name == "watch" {
                watches.append(value)
            } else if values.updateValue(value, forKey: name) != nil {
                repeated.insert(name)
            }
        }
    }

    /// The names of the parameters given, but `watch`.
    package var names: Dictionary<String, String>.Keys { values.keys }

    /// The value of `name`; a 400 if it was given more than once.
    package func string(_ name: String) throws(APIError) -> String? {
        guard !repeated.contains(name) else {
            throw .badRequest("The query parameter \(name) is given more than once.")
        }
        return values[name]
    }

    /// The filters of `GET /books` and `/books/events`: a parameter for each field the table marks
    /// filterable, named and read as the field (in table order, so the first bad one is the one
    /// reported). The library of a path (`/libraries/{id}/books`) takes the place of its parameter,
    /// which is then not read.
    package func bookFilter(in library: String? = nil) throws(APIError) -> BookFilter {
        var filter = BookFilter()
        filter.library = library
        for field in BookField.filterable where filter[field] == nil {
            filter[field] = try value(of: field.descriptor)
        }
        return filter
    }

    /// The parameter named as the field, read as its kind. Text may be anything but U+0000, which
    /// no stored text holds (PostgreSQL's text cannot, so it is refused on both engines).
    private func value(of field: FieldDescriptor) throws(APIError) -> FieldValue? {
        switch field.kind {
        case .identifier: return try identifier(field.name).map(FieldValue.string)
        case .boolean: return try bool(field.name).map(FieldValue.bool)
        case .integer:
            guard let text = try string(field.name) else { return nil }
            guard let number = Int(text) else { throw .badRequest("\(field.name) must be a whole number.") }
            return .int(number)
        case .text, .timestamp:
            guard let text = try string(field.name) else { return nil }
            guard !text.utf8.contains(0) else { throw .badRequest("\(field.name) must not contain U+0000.") }
            return .string(text)
        }
    }

    /// `limit`: 1 to 500, default 50.
    package func limit() throws(APIError) -> Int {
        guard let text = try string("limit") else { return 50 }
        guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), text.utf8.count <= 4, let value = Int(text),
            (1...500).contains(value)
        else { throw .badRequest("limit must be a whole number from 1 to 500.") }
        return value
    }

    /// The position after which a page starts: 0 without `cursor`.
    package func cursor() throws(APIError) -> Int {
        try string("cursor").map { text throws(APIError) in try Cursor.decode(text) } ?? 0
    }

    /// `sort`: a sortable field of `Field`, with `-` before it for descending order; nil without it.
    package func order<Field: ResourceField>(of _: Field.Type) throws(APIError) -> ListOrder<Field>? {
        guard let text = try string("sort") else { return nil }
        guard let order = ListOrder<Field>(parsing: text) else {
            throw .badRequest(
                "sort must be one of \(ListOrder<Field>.choices), with - before it for descending order.")
        }
        return order
    }

    /// Where the page starts: after the `cursor` of a page of `order` (insertion order when nil),
    /// or from the start without one.
    package func start<Field>(in order: ListOrder<Field>?) throws(APIError) -> ListStart {
        guard let order else { return .seq(try cursor()) }
        guard let text = try string("cursor") else { return .sorted(nil) }
        return .sorted(try Cursor.decode(text, in: order))
    }

    /// `q`: the text a book's title or author must contain; nil without it or when it is empty.
    package func search() throws(APIError) -> TextSearch? {
        guard let text = try string("q"), !text.isEmpty else { return nil }
        guard let search = TextSearch(text) else {
            throw .badRequest(
                "q must have \(TextSearch.lengths.lowerBound) to \(TextSearch.lengths.upperBound) characters, and no U+0000."
            )
        }
        return search
    }

    /// A boolean parameter: `true` or `false`.
    package func bool(_ name: String) throws(APIError) -> Bool? {
        switch try string(name) {
        case nil: return nil
        case "true": return true
        case "false": return false
        default: throw .badRequest("\(name) must be true or false.")
        }
    }

    /// A UUID parameter, canonicalized.
    package func identifier(_ name: String) throws(APIError) -> String? {
        guard let text = try string(name) else { return nil }
        guard let id = Identifier.canonical(text) else { throw .badRequest("\(name) must be a UUID.") }
        return id
    }
}
