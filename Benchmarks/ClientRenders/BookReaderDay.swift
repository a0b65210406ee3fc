import AsyncHTTPClient
import Foundation
import LibraryClient
import Observation

/// `client-renders BASE_URL --book-reader [--books N] [--seconds S] [--rate W] [--out FILE]`
///
/// The renders claim measured as a book-reader app runs (issue "The guide's app, ported"): the
/// guide's screens over a library of N books (default 1,000) through S seconds (default 60) of a
/// library's day at W writes/s (default 20), for four designs in turn (same seed, a fresh library
/// each):
/// - `fields`: this client, whose watches name the fields the views read;
/// - `whole`: the same @Observable models with whole-resource subscriptions;
/// - `observableObject`: today's `ObservableObject` design, whole-resource subscriptions, where a
///   change of any field of an object re-renders every view that observes that object;
/// - `structStore`: the common single store of structs (`@Published var books: [Book]`): every
///   view that observes the store re-renders on any change of any book; a row, handed its book's
///   struct, re-renders when that struct changes (SwiftUI skips a row whose input is equal).
///
/// The screen: a header (the library's `name` and `bookCount`); a lazy list (the membership)
/// that mounts the 20 rows on screen (title and author), scrolled by 20 rows every 15 s; the
/// detail view (the guide's `BookView`: title, author, ISBN, year, availability) and the edit
/// view (`BookEditView`: the title, bound) of the first row on screen. The day: availability
/// changes (checkouts and returns, 75% of the writes, skewed to popular books: rank `n·u³`),
/// title and author edits (10%), imports of 20 books in a burst every 10 s, and the user's own
/// edit through the binding (six characters typed into the shown book's title every 15 s, from the first second).
///
/// Reported per design: renders per view (each view's first render excluded), bytes of event
/// stream received, and main-actor time spent in the views' bodies.
@MainActor
enum BookReaderDay {
    enum Mode: String, CaseIterable {
        case fields, whole, observableObject, structStore
    }

    static func main(_ options: ClientRenders.Options) async throws {
        var rows: [[String: Any]] = []
        for mode in Mode.allCases {
            let row = try await run(mode, options)
            rows.append(row)
            let perView = (row["rendersPerView"] as! [String: Int]).sorted { $0.key < $1.key }
                .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            print(
                "\(mode.rawValue): \(row["renders"]!) renders (\(perView)), \(row["bytes"]!) bytes, "
                    + String(format: "%.1f ms in bodies", row["bodyMs"] as! Double))
        }
        let fields = rows[0]
        for row in rows.dropFirst() {
            print(
                String(
                    format: "%@ / fields: %.2fx the renders, %.2fx the bytes, %.2fx the body time",
                    row["mode"] as! String,
                    Double(row["renders"] as! Int) / Double(max(1, fields["renders"] as! Int)),
                    Double(row["bytes"] as! Int) / Double(max(1, fields["bytes"] as! Int)),
                    (row["bodyMs"] as! Double) / max(0.001, fields["bodyMs"] as! Double)))
        }
        if options.check {
            let renders = rows.map { $0["renders"] as! Int }
            let bytes = rows.map { $0["bytes"] as! Int }
            guard renders[0] > 0, renders[0] <= renders[2], renders[2] <= renders[3], bytes[0] <= bytes[1],
                (rows[0]["typedTitles"] as! Int) > 0
            else {
                print("client-renders --book-reader: check FAILED")
                exit(1)
            }
            print("client-renders --book-reader: check passed")
        }
        if let out = options.out {
            let results: [String: Any] = [
                "books": options.books, "seconds": options.seconds, "writesPerSecond": options.rate, "modes": rows,
            ]
            let data = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: out))
        }
    }

    /// A view: its body under `withObservationTracking`, run again after a change of anything it
    /// read, with the time its bodies took.
    @MainActor
    final class View {
        let name: String
        let body: () -> Void
        var renders = 0
        var time: Duration = .zero
        var alive = true

        init(_ name: String, _ body: @escaping () -> Void) {
            self.name = name
            self.body = body
            render()
            renders = 0
            time = .zero
        }

        func render() {
            guard alive else { return }
            renders += 1
            let start = ContinuousClock.now
            withObservationTracking(body) { [weak self] in
                Task { @MainActor in self?.render() }
            }
            time += ContinuousClock.now - start
        }
    }

    static func everyField(_ book: Book) { for field in BookField.allCases { _ = book[field] } }
    static func everyField(_ library: Library) {
        for field in LibraryField.allCases { _ = library[field] }
        _ = library.books
    }
    /// What a view that observes a single store of structs depends on: every book's every field.
    static func theStore(_ library: Library) {
        everyField(library)
        for book in library.books { everyField(book) }
    }

    enum Write: Sendable {
        case available(UUID, Bool)
        case title(UUID, String)
        case author(UUID, String)
        case create(String)
    }

    static func run(_ mode: Mode, _ options: ClientRenders.Options) async throws -> [String: Any] {
        let http = HTTPClient.shared
        let base = options.base.absoluteString
        let setup = LibraryClient(baseURL: options.base)
        let library = try await setup.createLibrary { $0.name = "Book reader \(mode.rawValue)" }
        let ids = try await ClientRenders.seedBooks(options.books, base: base) { index in
            #"{"libraryId":"\#(library.id.lowercased)","title":"Book \#(index)","author":"Author \#(index % 50)","isbn":null,"publishedYear":\#(1900 + index % 120)}"#
        }

        let client = LibraryClient(baseURL: options.base)
        client.watchesEveryField = mode != .fields
        let model = try await client.library(id: library.id)
        let store = mode == .structStore
        let object = mode == .observableObject
        let scroll = Scroll()
        var rowViews: [UUID: View] = [:]
        var shown: Book?
        var detail: View?
        var editor: View?
        var retired: [String: (Int, Duration)] = [:]
        func retire(_ view: View) {
            view.alive = false
            retired[view.name, default: (0, .zero)].0 += view.renders
            retired[view.name, default: (0, .zero)].1 += view.time
        }
        func show(_ book: Book) {
            guard shown !== book else { return }
            shown = book
            detail.map(retire)
            editor.map(retire)
            detail = View("detail") {
                if store { theStore(model) } else if object { everyField(book) }
                _ = (book.title, book.author, book.isbn, book.publishedYear, book.available)
            }
            editor = View("edit") {
                if store { theStore(model) } else if object { everyField(book) }
                _ = book.title
            }
        }
        let header = View("header") {
            if store { theStore(model) } else if object { everyField(model) }
            _ = (model.name, model.bookCount)
        }
        // The lazy list: its body reads the membership and mounts the rows on screen.
        let list = View("list") {
            if store { theStore(model) } else if object { everyField(model) }
            let members = model.books
            let visible = Array(members.dropFirst(scroll.offset).prefix(20))
            Task { @MainActor in
                let present = Set(visible.map(\.id))
                for (id, view) in rowViews where !present.contains(id) {
                    retire(view)
                    rowViews[id] = nil
                }
                for book in visible where rowViews[book.id] == nil {
                    rowViews[book.id] = View("row") {
                        if store || object { everyField(book) }
                        _ = (book.title, book.author)
                    }
                }
                if let first = visible.first { show(first) }
            }
        }
        guard await client.settled(timeout: .seconds(120)) else { throw BenchError("the client never settled") }
        while rowViews.count < min(20, ids.count) { try await Task.sleep(for: .milliseconds(10)) }
        _ = await client.settled(timeout: .seconds(60))
        try await Task.sleep(for: .milliseconds(500))
        var views: [View] { [header, list] + Array(rowViews.values) + [detail, editor].compactMap { $0 } }
        for view in views {
            view.renders = 0
            view.time = .zero
        }
        retired = [:]
        let bytesBefore = client.streamBytesReceived

        // The day's writes by others, a fixed sequence paced at the rate, off the main actor.
        var generator = SplitMix(seed: 20_261_207)
        var popularity = ids
        for index in popularity.indices.reversed() {
            popularity.swapAt(index, Int(generator.next() % UInt64(index + 1)))
        }
        func uniform() -> Double { Double(generator.next() % 1_000_000) / 1_000_000 }
        var plan: [Write] = []
        var checkedOut: Set<UUID> = []
        let total = Int(options.seconds * options.rate)
        let burstEvery = Int(10 * options.rate)
        var imported = 0
        for index in 0..<total {
            if index % burstEvery == burstEvery - 1 {
                for _ in 0..<20 {
                    imported += 1
                    plan.append(.create("Imported \(imported)"))
                }
                continue
            }
            let roll = generator.next() % 100
            if roll < 75 {
                let u = uniform()
                let book = popularity[min(popularity.count - 1, Int(Double(popularity.count) * u * u * u))]
                let out = checkedOut.contains(book)
                if out { checkedOut.remove(book) } else { checkedOut.insert(book) }
                plan.append(.available(book, out))
            } else if roll < 80 {
                plan.append(.title(popularity[Int(generator.next() % UInt64(popularity.count))], "Edited \(index)"))
            } else if roll < 85 {
                plan.append(.author(popularity[Int(generator.next() % UInt64(popularity.count))], "Writer \(index)"))
            } else {
                let u = uniform()
                let book = popularity[min(popularity.count - 1, Int(Double(popularity.count) * u * u * u))]
                let out = checkedOut.contains(book)
                if out { checkedOut.remove(book) } else { checkedOut.insert(book) }
                plan.append(.available(book, out))
            }
        }
        let libraryID = library.id.lowercased
        let interval = 1.0 / options.rate
        let writer = Task.detached {
            let start = ContinuousClock.now
            var slot = 0
            for write in plan {
                switch write {
                case .create(let title):
                    _ = try await ClientRenders.post(
                        http, base + "/books", #"{"libraryId":"\#(libraryID)","title":"\#(title)"}"#)
                    continue  // a burst: no pause between its books
                case .available(let id, let flag):
                    try await ClientRenders.patch(http, base + "/books/" + id.lowercased, #"{"available":\#(flag)}"#)
                case .title(let id, let title):
                    try await ClientRenders.patch(http, base + "/books/" + id.lowercased, #"{"title":"\#(title)"}"#)
                case .author(let id, let author):
                    try await ClientRenders.patch(http, base + "/books/" + id.lowercased, #"{"author":"\#(author)"}"#)
                }
                slot += 1
                try await Task.sleep(until: start + .seconds(Double(slot) * interval))
            }
        }
        // The user, meanwhile: scrolls by 20 rows every 15 s, and types into the shown book's
        // title through the binding (what `TextField("Title", text: $book.title)` writes).
        let start = ContinuousClock.now
        let binding: ReferenceWritableKeyPath<Book, String> = \.title
        var typed = 0
        var second = 0
        while ContinuousClock.now - start < .seconds(options.seconds) {
            try await Task.sleep(until: start + .seconds(second + 1))
            second += 1
            if second % 15 == 1, let book = shown {
                for character in " (2nd)" {
                    book[keyPath: binding] = book.title + String(character)
                    try await Task.sleep(for: .milliseconds(80))
                }
                typed += 1
            }
            if second % 15 == 8 { scroll.offset = (scroll.offset + 20) % max(20, ids.count - 20) }
        }
        try await writer.value
        try await Task.sleep(for: .seconds(2))  // the last events arrive and render
        _ = await client.settled(timeout: .seconds(30))

        var perView: [String: Int] = retired.mapValues(\.0)
        var bodyTime = retired.values.reduce(Duration.zero) { $0 + $1.1 }
        for view in views {
            perView[view.name, default: 0] += view.renders
            bodyTime += view.time
        }
        let result: [String: Any] = [
            "mode": mode.rawValue,
            "renders": perView.values.reduce(0, +),
            "rendersPerView": perView,
            "bytes": client.streamBytesReceived - bytesBefore,
            "bodyMs": bodyTime.timeInterval * 1000,
            "writes": plan.count,
            "typedTitles": typed,
        ]
        client.close()
        for view in views { view.alive = false }
        try await ClientRenders.send(http, .DELETE, base + "/libraries/" + library.id.lowercased, nil, expect: [204])
        return result
    }
}

/// The list's scroll position: state its body reads, as a `ScrollView`'s would be.
@MainActor
@Observable
final class Scroll {
    var offset = 0
}
