import Foundation

/// The order of a sorted list (`sort=title`, `sort=-title`): one sortable field of the table,
/// ascending or descending, ties broken by `id` in the same direction.
///
/// The order is the same on every engine, because each compares the same key (`SortKey`):
/// - text with ASCII letters folded to lower case, then byte for byte in UTF-8 (code point order),
///   so `apple < Banana < cherry < Éclair < émail`: letters outside ASCII keep their case and sort
///   after every ASCII letter;
/// - whole numbers by value, a missing one (`publishedYear: null`) before every number;
/// - timestamps in time order (their RFC 3339 text, byte for byte).
package struct ListOrder<Field: ResourceField>: Sendable, Hashable {
    package let field: Field
    package let descending: Bool

    package init(_ field: Field, descending: Bool = false) {
        precondition(field.descriptor.sortable, "\(field.name) is not sortable")
        self.field = field
        self.descending = descending
    }

    /// `title` or `-title`; nil when it names no sortable field.
    package init?(parsing text: String) {
        let descending = text.utf8.first == UInt8(ascii: "-")
        guard let field = Field(named: descending ? text.dropFirst() : Substring(text)), field.descriptor.sortable
        else { return nil }
        self.init(field, descending: descending)
    }

    /// As `sort=` spells it.
    package var text: String { (descending ? "-" : "") + field.name }

    /// The sortable fields, as a 400 lists them.
    package static var choices: String {
        Field.allCases.filter(\.descriptor.sortable).map(\.name).joined(separator: ", ")
    }

    /// Whether a row with key `a` and id `aID` comes before one with `b` and `bID` in this order.
    package func precedes(_ a: FieldValue, _ aID: String, _ b: FieldValue, _ bID: String) -> Bool {
        var comparison = SortKey.compare(a, b)
        if comparison == 0 { comparison = SortKey.compareBytes(aID, bID) }
        return descending ? comparison > 0 : comparison < 0
    }
}

/// The position a sorted page starts after: the sort key and the id of the last row before it.
package struct SortPosition: Sendable, Hashable {
    /// The row's `SortKey` (folded text, or a number with a missing one as `SortKey.missingNumber`).
    package let key: FieldValue
    package let id: String

    package init(key: FieldValue, id: String) {
        self.key = key
        self.id = id
    }
}

/// A field's value as lists sort it; see `ListOrder`.
package enum SortKey {
    /// What a missing whole number sorts as: below every value a sortable number may hold
    /// (`publishedYear` is -9999 to 9999). Both engines index `coalesce(column, -10000)`.
    package static let missingNumber = -10_000

    /// The key of a value of `field`: text with ASCII letters in lower case, a missing number as
    /// `missingNumber`, anything else (a timestamp's text too) as it is.
    package static func of(_ value: FieldValue, _ field: FieldDescriptor) -> FieldValue {
        switch value {
        case .string(let text): field.kind == .text ? .string(fold(text)) : value
        case .null: .int(missingNumber)
        case .int, .bool: value
        }
    }

    /// `text` with A-Z as a-z and every other byte kept: SQLite's `NOCASE`, PostgreSQL's
    /// `lower(… COLLATE "C")`.
    package static func fold(_ text: String) -> String {
        guard text.utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return text }
        return String(decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Negative, zero or positive as `a` sorts before, with or after `b` (two keys of one field).
    package static func compare(_ a: FieldValue, _ b: FieldValue) -> Int {
        switch (a, b) {
        case (.string(let x), .string(let y)): compareBytes(x, y)
        case (.int(let x), .int(let y)): x < y ? -1 : x == y ? 0 : 1
        case (.bool(let x), .bool(let y)): x == y ? 0 : x ? 1 : -1
        default: preconditionFailure("keys of different kinds: \(a), \(b)")
        }
    }

    /// UTF-8 bytes compared as `memcmp`, the shorter first on a common prefix.
    package static func compareBytes(_ a: String, _ b: String) -> Int {
        var (a, b) = (a, b)
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let common = min(x.count, y.count)
                let result = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
                return result != 0 ? Int(result) : x.count - y.count
            }
        }
    }
}

/// What `q=` keeps: books whose title or author contains the text, ASCII letters compared without
/// case and every other character exactly (`dune` finds "Dune"; `é` does not find "É"), as
/// SQLite's `LIKE` and PostgreSQL's `ILIKE` under the "C" collation compare.
package struct TextSearch: Sendable, Hashable {
    package let text: String
    /// The text folded as `SortKey.fold`: what a book's folded title or author must contain.
    let folded: [UInt8]

    /// The fewest characters a search has: each engine's index is of three-character pieces
    /// (trigrams), and a shorter text would have none to look up.
    package static let lengths = 3...200

    /// A search for `text`, which must have `lengths` characters (Unicode scalars) and no U+0000.
    package init?(_ text: String) {
        guard Self.lengths.contains(text.unicodeScalars.count), !text.utf8.contains(0) else { return nil }
        self.text = text
        self.folded = Array(SortKey.fold(text).utf8)
    }

    /// Whether `book` is found.
    package func matches(_ book: BookRecord) -> Bool {
        contains(book.title) || contains(book.author)
    }

    private func contains(_ text: String) -> Bool {
        let haystack = Array(SortKey.fold(text).utf8)
        guard haystack.count >= folded.count else { return false }
        for start in 0...(haystack.count - folded.count)
        where haystack[start] == folded[0] && haystack[start..<start + folded.count].elementsEqual(folded) {
            return true
        }
        return false
    }

    /// The text as a `LIKE` pattern that finds it anywhere, `\` escaping `%`, `_` and `\`.
    package var likePattern: String {
        var pattern = "%"
        for character in text.unicodeScalars {
            if character == "%" || character == "_" || character == "\\" { pattern.append("\\") }
            pattern.unicodeScalars.append(character)
        }
        return pattern + "%"
    }

    /// The text as an FTS5 phrase (in double quotes, a quote doubled): with the trigram
    /// tokenizer, the rows holding it as a substring, in any case.
    package var phrase: String {
        "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// A list of books as `GET /books` asks for it: a filter, an optional search, and an order
/// (insertion order when nil).
package struct BookQuery: Sendable, Hashable {
    package var filter: BookFilter
    package var search: TextSearch?
    package var order: ListOrder<BookField>?

    package init(_ filter: BookFilter = BookFilter(), search: TextSearch? = nil, order: ListOrder<BookField>? = nil) {
        self.filter = filter
        self.search = search
        self.order = order
    }

    /// Whether `book` is in the list (its library aside from `among`).
    package func matches(_ book: BookRecord) -> Bool {
        filter.matches(book.keys) && (search?.matches(book) ?? true)
    }
}

/// Where a page of a list starts.
package enum ListStart: Sendable, Hashable {
    /// After the row with this `seq`, in insertion order (0: from the start).
    case seq(Int)
    /// In a sorted list: from the start (nil), or after the row at this position.
    case sorted(SortPosition?)

    /// The `seq` a page in insertion order starts after (0 for a sorted start).
    package var seq: Int {
        if case .seq(let seq) = self { seq } else { 0 }
    }

    /// The position a sorted page starts after, if any.
    package var position: SortPosition? {
        if case .sorted(let position) = self { position } else { nil }
    }
}

extension FieldRecord {
    /// Where this record stands in `order`: what the cursor of a page ending with it holds.
    package func position(in order: ListOrder<Field>) -> SortPosition {
        SortPosition(key: SortKey.of(self[order.field], order.field.descriptor), id: id)
    }
}
