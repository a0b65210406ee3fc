import APICore
import Foundation
import LibraryDomain
import LiveEngine
import Testing

@testable import EventStreams

/// The server's side of the watch grammar's shared table (`Tests/WatchGrammar/cases.json`): each
/// printed case's text parses to its watch and prints back the same, and each refused text is a
/// 400 that says why. The client's printer and the console's are held to the same table.
@Suite struct WatchGrammarTests {
    static var table: [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../WatchGrammar/cases.json")
        let data = try! Data(contentsOf: url)
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    static var printed: [[String: Any]] { table["printed"] as! [[String: Any]] }
    static var refused: [[String: Any]] { table["refused"] as! [[String: Any]] }

    /// The watch a case describes, as the server would hold it.
    static func request(_ item: [String: Any]) -> SubscriptionRequest {
        let fields = item["fields"] as! [String]
        let id = item["id"] as? String ?? ""
        switch item["target"] as! String {
        case "book":
            return SubscriptionRequest(target: .book(id), bookFields: Set(fields.compactMap { BookField(named: $0) }))
        case "library":
            var request = SubscriptionRequest(target: .library(id))
            for name in fields {
                if let field = LibraryField(named: name) {
                    request.libraryFields.insert(field)
                } else if name == "books" {
                    request.members = true
                } else {
                    request.members = true
                    request.bookFields.insert(BookField(named: name.dropFirst(6))!)
                }
            }
            return request
        case "libraries":
            return SubscriptionRequest(
                target: .libraries, libraryFields: Set(fields.compactMap { LibraryField(named: $0) }), members: true)
        default:
            var filter = BookFilter()
            for (name, value) in item["filters"] as? [String: Any] ?? [:] {
                let field = BookField(named: name)!
                if let flag = value as? Bool {
                    filter[field] = .bool(flag)
                } else {
                    filter[field] = .string(value as! String)
                }
            }
            return SubscriptionRequest(
                target: .books(filter), bookFields: Set(fields.compactMap { BookField(named: $0) }), members: true)
        }
    }

    /// Target, fields (but `id`, which every event carries) and membership.
    static func key(_ request: SubscriptionRequest) -> String {
        let library = LibraryField.allCases.filter { $0 != .id && request.libraryFields.contains($0) }.map(\.name)
        let book = BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }.map(\.name)
        return "\(request.target) \(library) \(book) \(request.members)"
    }

    @Test func everyPrintedCase_ParsesToItsWatch_AndPrintsBackTheSame() throws {
        #expect(Self.printed.count >= 10)
        for item in Self.printed {
            let text = item["text"] as! String
            let expected = Self.request(item)
            #expect(EventStreams.watchText(expected) == text)
            let parsed = try EventStreams.watchRequest(text)
            #expect(Self.key(parsed) == Self.key(expected), "\(text)")
            #expect(EventStreams.watchText(parsed) == text)
        }
    }

    @Test func everyRefusedCase_IsA400ThatSaysWhy() {
        #expect(Self.refused.count >= 5)
        for item in Self.refused {
            let text = item["text"] as! String
            do {
                _ = try EventStreams.watchRequest(text)
                Issue.record("\(text) was taken")
            } catch {
                #expect(error.status.code == 400, "\(text)")
                #expect(error.detail.contains(item["detail"] as! String), "\(text): \(error.detail)")
            }
        }
    }

    /// A window of a list (the server's alone so far: the client and the console print none):
    /// its `sort`, `q`, `limit` and `cursor` after the filters, the sort field always among the
    /// fields, and the text printed back the same.
    @Test func windows_ParseToTheirQuery_AndPrintBackTheSame() throws {
        let library = "5d2c8a90-1b3e-4f6a-8c7d-9e0f1a2b3c4d"
        let order = ListOrder<BookField>(.title, descending: true)
        let cursor = Cursor.encode(SortPosition(key: .string("dune"), id: library), in: order)
        let texts = [
            "/books?libraryId=\(library)&sort=-title&q=Le%20Guin&limit=50&cursor=\(cursor)&fields=title,author",
            "/books?available=true&limit=5&cursor=\(Cursor.encode(12))&fields=title",
            "/books?sort=publishedYear&limit=1&fields=title,publishedYear",
        ]
        for text in texts {
            let parsed = try EventStreams.watchRequest(text)
            #expect(EventStreams.watchText(parsed) == text)
            guard case .window(let window) = parsed.target else {
                Issue.record("\(text) is not a window")
                continue
            }
            if let order = window.query.order { #expect(parsed.bookFields.contains(order.field)) }
        }
        let window = try EventStreams.watchRequest(texts[0])
        guard case .window(let first) = window.target else { return }
        #expect(first.query.search?.text == "Le Guin" && first.limit == 50 && first.query.filter.library == library)
        #expect(first.start == .sorted(SortPosition(key: .string("dune"), id: library)))
        // The sort field is asked for even when `fields` leaves it out; the text then names it.
        let widened = try EventStreams.watchRequest("/books?sort=author&limit=3&fields=title")
        #expect(EventStreams.watchText(widened) == "/books?sort=author&limit=3&fields=title,author")
        for refused in [
            "/books?sort=nope&fields=title", "/books?limit=0", "/books?q=ab", "/books?sort=title&cursor=c1",
        ] {
            #expect(throws: APIError.self, "\(refused)") { try EventStreams.watchRequest(refused) }
        }
    }
}
