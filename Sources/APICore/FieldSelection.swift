import LibraryDomain

/// The fields a client asked for with `?fields=`; `id` is always included.
package struct FieldSelection<Field: ResourceField>: Sendable {
    private let selected: Set<Field>?

    /// All fields.
    package static var all: FieldSelection { FieldSelection(selected: nil) }

    private init(selected: Set<Field>?) {
        self.selected = selected
    }

    /// Parses `a,b,c`; an empty or unknown name is a 400 that lists the valid names.
    package init(parsing text: String?) throws(APIError) {
        guard let text else {
            self.selected = nil
            return
        }
        var selected = Set<Field>()
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let field = Field(named: name) else {
                let valid = Field.allCases.map(\.name).joined(separator: ", ")
                let shown = name.isEmpty ? "an empty name" : "\"\(name)\""
                throw .badRequest("fields has \(shown); valid fields are: \(valid).")
            }
            selected.insert(field)
        }
        self.selected = selected
    }

    package func contains(_ field: Field) -> Bool { selected?.contains(field) ?? true }
}
