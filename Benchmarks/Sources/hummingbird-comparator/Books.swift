import Foundation
import Hummingbird

/// A book as library-server represents it (`isbn` and `publishedYear` are written as null when empty).
struct Book: ResponseCodable {
    var id: String
    var libraryId: String
    var title: String
    var author: String
    var isbn: String?
    var publishedYear: Int?
    var available: Bool
    var version: Int
    var createdAt: String
    var updatedAt: String

    static let columns =
        "id, library_id, title, author, isbn, published_year, available, version, created_at, updated_at, seq"

    init(row: Row) {
        id = row.text(0)
        libraryId = row.text(1)
        title = row.text(2)
        author = row.text(3)
        isbn = row.optionalText(4)
        publishedYear = row.optionalInt(5)
        available = row.int(6) != 0
        version = row.int(7)
        createdAt = row.text(8)
        updatedAt = row.text(9)
    }

    /// The writable fields.
    var fields: BookFields {
        BookFields(
            libraryId: libraryId, title: title, author: author, isbn: isbn, publishedYear: publishedYear,
            available: available)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(libraryId, forKey: .libraryId)
        try container.encode(title, forKey: .title)
        try container.encode(author, forKey: .author)
        try container.encode(isbn, forKey: .isbn)
        try container.encode(publishedYear, forKey: .publishedYear)
        try container.encode(available, forKey: .available)
        try container.encode(version, forKey: .version)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

/// A page of a list.
struct BookPage: ResponseEncodable {
    var items: [Book]
    var nextCursor: String?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(items, forKey: .items)
        try container.encode(nextCursor, forKey: .nextCursor)
    }

    enum CodingKeys: String, CodingKey { case items, nextCursor }
}

/// The body of `POST /books`.
struct NewBook: Decodable {
    var libraryId: String
    var title: String
    var author: String?
    var isbn: String?
    var publishedYear: Int?
    var available: Bool?
}

/// The body of `PATCH /books/{id}`, a JSON merge patch: an absent member leaves the field alone,
/// null clears an optional one.
struct BookPatch: Decodable {
    var libraryId: String?
    var title: String?
    var author: String?
    var isbn: String??
    var publishedYear: Int??
    var available: Bool?

    enum CodingKeys: String, CodingKey { case libraryId, title, author, isbn, publishedYear, available }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        libraryId = try container.decodeIfPresent(String.self, forKey: .libraryId)
        title = try container.decodeIfPresent(String.self, forKey: .title)
        author = try container.decodeIfPresent(String.self, forKey: .author)
        if container.contains(.isbn) { isbn = .some(try container.decodeIfPresent(String.self, forKey: .isbn)) }
        if container.contains(.publishedYear) {
            publishedYear = .some(try container.decodeIfPresent(Int.self, forKey: .publishedYear))
        }
        available = try container.decodeIfPresent(Bool.self, forKey: .available)
    }
}

/// The writable fields, validated as library-server validates them.
struct BookFields: Equatable {
    var libraryId: String
    var title: String
    var author: String
    var isbn: String?
    var publishedYear: Int?
    var available: Bool

    func validate() throws {
        var problems: [String] = []
        if UUID(uuidString: libraryId) == nil { problems.append("libraryId must be a UUID") }
        if title.unicodeScalars.isEmpty || title.unicodeScalars.count > 500 {
            problems.append("title must be 1 to 500 characters long")
        }
        if author.unicodeScalars.count > 300 { problems.append("author must be at most 300 characters long") }
        if let isbn, !isValidISBN(isbn) { problems.append("isbn must be a valid ISBN-10 or ISBN-13") }
        if let publishedYear, !(-9999...9999).contains(publishedYear) {
            problems.append("publishedYear must be between -9999 and 9999")
        }
        if !problems.isEmpty {
            throw HTTPError(.unprocessableContent, message: problems.joined(separator: "; "))
        }
    }
}

/// ISBN-10 or ISBN-13 with hyphens allowed and the check digit checked.
func isValidISBN(_ text: String) -> Bool {
    let characters = Array(text.utf8.filter { $0 != UInt8(ascii: "-") })
    func digit(_ character: UInt8) -> Int? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(character) ? Int(character - UInt8(ascii: "0")) : nil
    }
    switch characters.count {
    case 10:
        var sum = 0
        for (index, character) in characters.enumerated() {
            if index == 9, character == UInt8(ascii: "X") || character == UInt8(ascii: "x") {
                sum += 10
            } else if let value = digit(character) {
                sum += value * (10 - index)
            } else {
                return false
            }
        }
        return sum % 11 == 0
    case 13:
        var sum = 0
        for (index, character) in characters.enumerated() {
            guard let value = digit(character) else { return false }
            sum += index % 2 == 0 ? value : value * 3
        }
        return sum % 10 == 0
    default:
        return false
    }
}

/// RFC 3339 UTC with milliseconds, as library-server stores timestamps.
func timestamp() -> String {
    Date.now.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
}
