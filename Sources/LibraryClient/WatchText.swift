import Foundation
import LibraryModel

/// How the client spells its watches: the server's watch grammar, in the one spelling its shared
/// table of cases gives (`Tests/WatchGrammar/cases.json`, which the client's tests hold this to):
/// filters and fields in the field table's order, filter values percent-encoded but for ASCII
/// letters, digits and `-._~`, `fields=id` when only existence is demanded, a library's own fields
/// then `books`.
enum WatchText {
    /// `/books/ID?fields=a,b`.
    static func book(_ id: String, fields: [BookField]) -> String {
        "/books/" + id + "?fields=" + names(fields.filter { $0 != .id }.map(\.name))
    }

    /// `/libraries/ID?fields=a,b,books`: `books` when its membership is demanded.
    static func library(_ id: String, fields: [LibraryField], members: Bool) -> String {
        "/libraries/" + id + "?fields=" + names(fields.filter { $0 != .id }.map(\.name) + (members ? ["books"] : []))
    }

    /// `/books?libraryId=…&author=…`: a live query's filters, the key the client knows it by.
    static func books(_ filters: [BookField: FieldValue]) -> String {
        let query = BookField.filterable.compactMap { field -> String? in
            switch filters[field] {
            case .string(let text): field.name + "=" + percentEncoded(text)
            case .int(let number): field.name + "=\(number)"
            case .bool(let truth): field.name + "=\(truth)"
            case .null, nil: nil
            }
        }
        return "/books?" + query.joined(separator: "&")
    }

    /// The live list of libraries: their ids (their fields are watched by their own models).
    static let libraries = "/libraries?fields=id"

    /// A live query's watch: its members' ids (their fields are watched by their own models).
    static func books(key: String) -> String {
        key + (key.hasSuffix("?") ? "" : "&") + "fields=id"
    }

    private static func names(_ names: [String]) -> String {
        names.isEmpty ? "id" : names.joined(separator: ",")
    }

    /// `text` with every byte but ASCII letters, digits and `-._~` as `%XX`.
    static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    /// RFC 3986's unreserved characters: ASCII only (`CharacterSet.alphanumerics` holds every
    /// script's letters, which would go out unescaped).
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
