import Foundation
import TestSupport
import Testing

/// What one subscriber believes, rebuilt from its events alone.
final class SubscriberModel {
    /// Nil for a watch of a multiplexed stream, whose events come from the stream's frames.
    let stream: EventStreamClient?
    let isLibrary: Bool
    let id: String
    let fields: Set<String>
    let memberFields: Set<String>
    let members: Bool
    var state: [String: Any] = [:]
    var memberStates: [String: [String: Any]] = [:]
    var deleted = false

    init(
        stream: EventStreamClient?, isLibrary: Bool, id: String, fields: Set<String>, memberFields: Set<String>,
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

/// What a collection subscriber believes (or one watch of a multiplexed stream), rebuilt from its
/// events alone.
final class CollectionModel {
    /// The list the collection must equal, such as `/books?author=a1`.
    let list: String
    let fields: Set<String>
    var items: [String: [String: Any]] = [:]

    init(list: String, fields: Set<String>) {
        self.list = list
        self.fields = fields
    }

    /// Applies an event, recording an issue for any field or item the subscriber did not ask for.
    func apply(_ event: ReceivedEvent) {
        let json = event.json
        if event.event == "snapshot" {
            #expect(Set(json.keys) == ["items"])
            items = [:]
            for entry in json["items"] as? [[String: Any]] ?? [] { add(entry) }
            return
        }
        #expect(event.event == "change")
        #expect(!json.isEmpty && Set(json.keys).isSubset(of: ["added", "removed", "changed"]), "\(event.data)")
        for entry in json["added"] as? [[String: Any]] ?? [] { add(entry) }
        for removed in json["removed"] as? [String] ?? [] {
            #expect(items[removed] != nil, "removed an item \(list) never had")
            items[removed] = nil
        }
        for entry in json["changed"] as? [[String: Any]] ?? [] {
            var entry = entry
            let id = entry.removeValue(forKey: "id") as? String ?? ""
            #expect(items[id] != nil, "changed an item \(list) does not have")
            #expect(
                !entry.isEmpty && Set(entry.keys).isSubset(of: fields),
                "unrequested \(Set(entry.keys).subtracting(fields))")
            items[id, default: [:]].merge(entry) { $1 }
        }
    }

    private func add(_ entry: [String: Any]) {
        var entry = entry
        let id = entry.removeValue(forKey: "id") as? String ?? ""
        #expect(Set(entry.keys) == fields, "an item carries exactly the requested fields")
        items[id] = entry
    }

    /// Checks the rebuilt collection against the list.
    func check(_ live: LiveServer) throws {
        let listed = try self.listed(live)
        #expect(Set(items.keys) == Set(listed.compactMap { $0["id"] as? String }), "the items of \(list)")
        for item in listed {
            let state = items[item["id"] as? String ?? ""] ?? [:]
            for field in fields { #expect(LiveRandomizedTests.same(state[field], item[field]), "\(list) \(field)") }
        }
    }

    /// Whether the rebuilt collection equals the list now (recording nothing).
    func matches(_ live: LiveServer) throws -> Bool {
        let listed = try self.listed(live)
        guard Set(items.keys) == Set(listed.compactMap { $0["id"] as? String }) else { return false }
        return listed.allSatisfy { item in
            let state = items[item["id"] as? String ?? ""] ?? [:]
            return fields.allSatisfy { LiveRandomizedTests.same(state[$0], item[$0]) }
        }
    }

    /// The list's items: one page of `list`, of up to 500 unless it names its `limit` (a window's).
    private func listed(_ live: LiveServer) throws -> [[String: Any]] {
        let whole = list.contains("limit=") ? "" : (list.contains("?") ? "&" : "?") + "limit=500"
        let page = try live.request("GET", list + whole)
        return page.json["items"] as? [[String: Any]] ?? []
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
        /// Opens a library stream with random fields, or those of `shape`.
        func subscribeToLibrary(like shape: SubscriberModel? = nil) throws -> SubscriberModel {
            let id = shape?.id ?? libraryIDs.randomElement(using: &random)!
            var fields = Set(libraryFieldNames.filter { _ in Bool.random(using: &random) })
            var memberFields = Set(["title", "author", "available"].filter { _ in Bool.random(using: &random) })
            var members = !memberFields.isEmpty || Bool.random(using: &random)
            if let shape { (fields, memberFields, members) = (shape.fields, shape.memberFields, shape.members) }
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
            return model
        }
        for _ in 0..<16 {
            let isLibrary = Bool.random(using: &random)
            if isLibrary {
                subscribers.append(try subscribeToLibrary())
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

        // Collection streams, filtered on what the writes below change.
        var collections: [(EventStreamClient, CollectionModel)] = []
        let collectionLists = [
            ("/books?author=a1", "title,available"), ("/books?available=false", "author"),
            ("/books?libraryId=\(libraryIDs[0])&author=a0", "title"),
            ("/books?libraryId=\(libraryIDs[1])", "libraryId,author,available"), ("/libraries", "name,bookCount"),
        ]
        for (list, fields) in collectionLists {
            let path = list.replacingOccurrences(of: "?", with: "/events?") + (list.contains("?") ? "&" : "/events?")
            let stream = try live.events(path + "fields=\(fields)")
            let model = CollectionModel(list: list, fields: Set(fields.split(separator: ",").map(String.init)))
            model.apply(try #require(try stream.next()))
            collections.append((stream, model))
        }
        // Multiplexed streams: each watch rebuilt as its own subscriber would be.
        var multiplexed: [(EventStreamClient, [String: Any], lastSeq: Int)] = []
        for index in 0..<2 {
            let book = bookIDs[index * 3]
            let library = libraryIDs[index]
            var watches: [String: Any] = [
                "/books/\(book)?fields=title,author": SubscriberModel(
                    stream: nil, isLibrary: false, id: book, fields: ["title", "author"],
                    memberFields: [], members: false),
                "/libraries/\(library)?fields=name,books.available": SubscriberModel(
                    stream: nil, isLibrary: true, id: library, fields: ["name"],
                    memberFields: ["available"], members: true),
                "/books?author=a\(index)&fields=publishedYear": CollectionModel(
                    list: "/books?author=a\(index)", fields: ["publishedYear"]),
            ]
            if index == 1 {
                watches["/libraries?fields=address"] = CollectionModel(list: "/libraries", fields: ["address"])
            }
            let stream = try live.events(WatchStreamTests.query(Array(watches.keys)))
            let frame = try #require(try stream.next())
            Self.apply(frame, to: watches)
            multiplexed.append((stream, watches, WatchStreamTests.seq(frame)))
        }

        for step in 0..<80 {
            // Subscribers join while the writes go on, half of them asking what an earlier one
            // asked (a kept snapshot and the change since), and some leave.
            if step % 5 == 4 {
                let libraries = subscribers.filter(\.isLibrary)
                let like = Bool.random(using: &random) ? libraries.randomElement(using: &random) : nil
                subscribers.append(try subscribeToLibrary(like: like))
            }
            if step % 16 == 15, let leaving = subscribers.indices.randomElement(using: &random) {
                subscribers.remove(at: leaving)  // its connection closes
            }
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

        // Each stream is read until it matches the lists, or for 10 s (a quiet spell alone can be
        // too short on a loaded machine): then the checks below say what differs.
        func settle(_ readAndCompare: () throws -> Bool) rethrows {
            let deadline = Date().addingTimeInterval(10)
            while try !readAndCompare() && Date() < deadline {}
        }
        for (stream, model) in collections {
            var ids: [Int] = []
            try settle {
                for event in stream.drain(quiet: 300) {
                    ids += Int(event.id ?? "").map { [$0] } ?? []
                    model.apply(event)
                }
                return try model.matches(live)
            }
            #expect(ids == ids.sorted() && Set(ids).count == ids.count, "ids strictly increase")
            try model.check(live)
        }
        for (stream, watches, firstSeq) in multiplexed {
            var frames: [ReceivedEvent] = []
            try settle {
                let more = stream.drain(quiet: 300)
                frames += more
                more.forEach { Self.apply($0, to: watches) }
                return try watches.values.allSatisfy { try ($0 as? CollectionModel)?.matches(live) ?? true }
            }
            let seqs = [firstSeq] + frames.map(WatchStreamTests.seq)
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "frame ids strictly increase: \(seqs)")
            for model in watches.values {
                if let model = model as? CollectionModel { try model.check(live) }
            }
            subscribers += watches.values.compactMap { $0 as? SubscriberModel }
        }
        for subscriber in subscribers {
            for event in subscriber.stream?.drain(quiet: 400) ?? [] { subscriber.apply(event) }
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

    /// Hands each entry of a `/events` frame to its watch's model.
    static func apply(_ frame: ReceivedEvent, to watches: [String: Any]) {
        #expect(frame.event == "message")
        for entry in frame.entries {
            let watch = entry["watch"] as? String ?? ""
            let data = (try? JSONSerialization.data(withJSONObject: entry["data"] ?? [:])) ?? Data()
            let event = ReceivedEvent(
                event: entry["event"] as? String ?? "", id: frame.id, data: String(decoding: data, as: UTF8.self))
            switch watches[watch] {
            case let model as SubscriberModel: model.apply(event)
            case let model as CollectionModel: model.apply(event)
            default: Issue.record("an entry for a watch the stream does not carry: \(watch)")
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
