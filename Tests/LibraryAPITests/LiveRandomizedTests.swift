import Foundation
import TestSupport
import Testing

/// A small deterministic generator, so a failing run can be repeated.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

/// What one subscriber believes, rebuilt from its events alone.
final class SubscriberModel {
    let stream: EventStreamClient
    let isLibrary: Bool
    let id: String
    let fields: Set<String>
    let memberFields: Set<String>
    let members: Bool
    var state: [String: Any] = [:]
    var memberStates: [String: [String: Any]] = [:]
    var deleted = false

    init(
        stream: EventStreamClient, isLibrary: Bool, id: String, fields: Set<String>, memberFields: Set<String>,
        members: Bool
    ) {
        self.stream = stream
        self.isLibrary = isLibrary
        self.id = id
        self.fields = fields
        self.memberFields = memberFields
        self.members = members
    }

    /// Applies an event, recording an issue for any field the subscriber did not ask for.
    func apply(_ event: ReceivedEvent) {
        var json = event.json
        #expect(json["id"] as? String == id)
        json["id"] = nil
        if event.event == "delete" {
            #expect(json.isEmpty)
            deleted = true
            return
        }
        let books = json.removeValue(forKey: "books")
        #expect(
            Set(json.keys).isSubset(of: fields), "event carried \(Set(json.keys).subtracting(fields)), not requested")
        state.merge(json) { $1 }
        guard let books else { return }
        #expect(members, "books sent to a subscriber that did not ask for them")
        if event.event == "snapshot", let list = books as? [[String: Any]] {
            memberStates = [:]
            for entry in list { add(entry) }
        } else if let delta = books as? [String: Any] {
            for entry in delta["added"] as? [[String: Any]] ?? [] { add(entry) }
            for removed in delta["removed"] as? [String] ?? [] { memberStates[removed] = nil }
            for entry in delta["changed"] as? [[String: Any]] ?? [] {
                var entry = entry
                let memberID = entry.removeValue(forKey: "id") as? String ?? ""
                #expect(Set(entry.keys).isSubset(of: memberFields))
                memberStates[memberID, default: [:]].merge(entry) { $1 }
            }
        }
    }

    private func add(_ entry: [String: Any]) {
        var entry = entry
        let memberID = entry.removeValue(forKey: "id") as? String ?? ""
        #expect(Set(entry.keys) == memberFields, "a member carries exactly the requested book fields")
        memberStates[memberID] = entry
    }
}

@Suite struct LiveRandomizedTests {
    @Test(arguments: [1, 2, 3])
    func randomSubscribersSeeExactlyTheDatabase(seed: UInt64) throws {
        let live = try LiveServer()
        var random = SeededGenerator(state: 0x9E37_79B9_7F4A_7C15 &* seed)
        let libraryIDs = try (0..<3).map { try live.createLibrary("L\($0)") }
        var bookIDs = try (0..<8).map { try live.createBook(in: libraryIDs[$0 % 3], title: "B\($0)") }
        let bookFieldNames = [
            "libraryId", "title", "author", "isbn", "publishedYear", "available", "version", "updatedAt",
        ]
        let libraryFieldNames = ["name", "address", "bookCount", "version", "updatedAt"]

        var subscribers: [SubscriberModel] = []
        for _ in 0..<16 {
            let isLibrary = Bool.random(using: &random)
            if isLibrary {
                let id = libraryIDs.randomElement(using: &random)!
                let fields = Set(libraryFieldNames.filter { _ in Bool.random(using: &random) })
                let memberFields = Set(["title", "author", "available"].filter { _ in Bool.random(using: &random) })
                let members = !memberFields.isEmpty || Bool.random(using: &random)
                var names = Array(fields)
                if members { names.append("books") }
                names += memberFields.map { "books.\($0)" }
                if names.isEmpty { names = ["name"] }
                let stream = try live.events("/libraries/\(id)/events?fields=\(names.joined(separator: ","))")
                let model = SubscriberModel(
                    stream: stream, isLibrary: true, id: id, fields: fields.isEmpty && !members ? ["name"] : fields,
                    memberFields: memberFields, members: members
                )
                model.apply(try #require(try stream.next()))
                subscribers.append(model)
            } else {
                let id = bookIDs.randomElement(using: &random)!
                var fields = Set(bookFieldNames.filter { _ in Bool.random(using: &random) })
                if fields.isEmpty { fields = ["title"] }
                let stream = try live.events("/books/\(id)/events?fields=\(fields.joined(separator: ","))")
                let model = SubscriberModel(
                    stream: stream, isLibrary: false, id: id, fields: fields, memberFields: [], members: false)
                model.apply(try #require(try stream.next()))
                subscribers.append(model)
            }
        }

        for step in 0..<80 {
            let book = bookIDs.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                bookIDs.append(try live.createBook(in: libraryIDs.randomElement(using: &random)!, title: "new\(step)"))
            case 1 where bookIDs.count > 4:
                #expect(try live.request("DELETE", "/books/\(book)").status == 204)
                bookIDs.removeAll { $0 == book }
            case 2:
                let move = try live.request(
                    "PATCH", "/books/\(book)", body: #"{"libraryId":"\#(libraryIDs.randomElement(using: &random)!)"}"#)
                #expect(move.status == 200)
            case 3:
                let library = libraryIDs.randomElement(using: &random)!
                let address = Bool.random(using: &random) ? "null" : #""street \#(step)""#
                let patch = try live.request(
                    "PATCH", "/libraries/\(library)", body: #"{"name":"L\#(step)","address":\#(address)}"#)
                #expect(patch.status == 200)
            default:
                var members: [String] = []
                if Bool.random(using: &random) { members.append(#""title":"t\#(step)""#) }
                if Bool.random(using: &random) { members.append(#""author":"a\#(step % 3)""#) }
                if Bool.random(using: &random) { members.append(#""available":\#(Bool.random(using: &random))"#) }
                if Bool.random(using: &random) {
                    members.append(Bool.random(using: &random) ? #""isbn":null"# : #""isbn":"0-306-40615-2""#)
                }
                if Bool.random(using: &random) {
                    members.append(#""publishedYear":\#(Int.random(in: -50...2000, using: &random))"#)
                }
                let patch = try live.request("PATCH", "/books/\(book)", body: "{\(members.joined(separator: ","))}")
                #expect(patch.status == 200)
            }
        }

        for subscriber in subscribers {
            for event in subscriber.stream.drain(quiet: 400) { subscriber.apply(event) }
            if subscriber.isLibrary {
                let library = try live.request("GET", "/libraries/\(subscriber.id)")
                for field in subscriber.fields {
                    #expect(Self.same(subscriber.state[field], library.json[field]), "library \(field)")
                }
                guard subscriber.members else { continue }
                let page = try live.request("GET", "/libraries/\(subscriber.id)/books?limit=500")
                let books = page.json["items"] as? [[String: Any]] ?? []
                #expect(
                    Set(subscriber.memberStates.keys) == Set(books.compactMap { $0["id"] as? String }), "membership")
                for book in books {
                    let state = subscriber.memberStates[book["id"] as? String ?? ""] ?? [:]
                    for field in subscriber.memberFields {
                        #expect(Self.same(state[field], book[field]), "member \(field)")
                    }
                }
            } else {
                let book = try live.request("GET", "/books/\(subscriber.id)")
                #expect(subscriber.deleted == (book.status == 404), "a deleted book's stream ended with delete")
                guard !subscriber.deleted else { continue }
                for field in subscriber.fields {
                    #expect(Self.same(subscriber.state[field], book.json[field]), "book \(field)")
                }
            }
        }
    }

    /// Whether two JSON values are equal, compared as JSON text.
    static func same(_ a: Any?, _ b: Any?) -> Bool {
        func text(_ value: Any?) -> String {
            let data = try? JSONSerialization.data(withJSONObject: ["v": value ?? NSNull()], options: [.sortedKeys])
            return data.map { String(decoding: $0, as: UTF8.self) } ?? "?"
        }
        return text(a) == text(b)
    }
}
