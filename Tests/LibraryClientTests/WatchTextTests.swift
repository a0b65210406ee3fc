import Foundation
import LibraryModel
import Testing

@testable import LibraryClient

/// The client's side of the watch grammar's shared table (`Tests/WatchGrammar/cases.json`): for
/// every watch of a kind the client makes (a book's fields, a library's fields and membership, a
/// live query's members, the list of libraries), it spells the text the server's printer does.
@Suite struct WatchTextTests {
    static var printed: [[String: Any]] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../WatchGrammar/cases.json")
        let table = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        return table["printed"] as! [[String: Any]]
    }

    @Test func everyWatchTheClientMakes_IsSpelledAsTheSharedTableSays() {
        var checked = 0
        for item in Self.printed {
            let text = item["text"] as! String
            let fields = item["fields"] as! [String]
            let id = item["id"] as? String ?? ""
            switch item["target"] as! String {
            case "book":
                let named = BookField.allCases.filter { fields.contains($0.name) }
                #expect(WatchText.book(id, fields: named) == text)
            case "library" where !fields.contains(where: { $0.hasPrefix("books.") }):
                let named = LibraryField.allCases.filter { fields.contains($0.name) }
                #expect(WatchText.library(id, fields: named, members: fields.contains("books")) == text)
            case "books" where fields.isEmpty:  // the client watches a live query's members by id
                var filters: [BookField: FieldValue] = [:]
                for (name, value) in item["filters"] as? [String: Any] ?? [:] {
                    let field = BookField(named: name)!
                    filters[field] = (value as? Bool).map(FieldValue.bool) ?? .string(value as! String)
                }
                #expect(WatchText.books(key: WatchText.books(filters)) == text)
            case "books":
                // Its members' fields are watched by their own models, never by the query: the
                // filters' spelling is what the table holds the client to.
                var filters: [BookField: FieldValue] = [:]
                for (name, value) in item["filters"] as? [String: Any] ?? [:] {
                    let field = BookField(named: name)!
                    filters[field] = (value as? Bool).map(FieldValue.bool) ?? .string(value as! String)
                }
                #expect(text.hasPrefix(WatchText.books(filters) + "&fields="))
            case "libraries" where fields.isEmpty:  // the live list of libraries, by id
                #expect(WatchText.libraries == text)
            default:
                continue  // not a watch the client makes (the libraries' fields, a library's members' fields)
            }
            checked += 1
        }
        #expect(checked >= 9)
    }
}
