import AsyncHTTPClient
import Foundation
import LibraryClient
import NIOCore
import NIOHTTP1
import Observation

/// `client-renders BASE_URL [--books N] [--seconds S] [--rate W] [--out FILE]`
///
/// The guide's claim, end to end: a screen of views over a library of N books (default 1,000),
/// driven through S seconds (default 60) of a realistic write mix at W writes/s (default 20):
/// titles 40%, authors 20%, availability 20%, moves 10%, creates 5%, deletes 5%. Three clients
/// see the same writes in turn (same seed, a fresh library each):
/// - `fields`: this client, which watches exactly the fields the views read;
/// - `whole`: the same @Observable models with whole-resource subscriptions (no `fields`);
/// - `objectWillChange`: whole-resource subscriptions and ObservableObject-style invalidation,
///   where any change of an object re-renders every view observing it.
/// The screen: a row per book showing its title, the list (membership), 10 detail views (title,
/// author, availability), a badge with the library's `bookCount`, a count of available books. A
/// render is a `body` run under `withObservationTracking`, run again after a change; renders
/// counted here exclude each view's first. Also PATCH-to-render latency of titles.
@main
@MainActor
enum ClientRenders {
    enum Mode: String, CaseIterable {
        case fields, whole, objectWillChange
    }

    struct Options {
        var base = URL(string: "http://127.0.0.1:8080")!
        var books = 1_000
        var seconds = 60.0
        var rate = 20.0
        var out: String?
        /// Fail unless the figures make sense (for CI's smoke run): titles rendered, and field
        /// demand neither renders more nor receives more than the other modes.
        var check = false
        /// The book-reader app's day (BookReaderDay.swift) instead of the screen of 1,000 rows.
        var bookReader = false
    }

    static func main() async throws {
        var options = Options()
        var arguments = Array(CommandLine.arguments.dropFirst())
        while !arguments.isEmpty {
            let argument = arguments.removeFirst()
            switch argument {
            case "--books": options.books = Int(arguments.removeFirst())!
            case "--seconds": options.seconds = Double(arguments.removeFirst())!
            case "--rate": options.rate = Double(arguments.removeFirst())!
            case "--out": options.out = arguments.removeFirst()
            case "--check": options.check = true
            case "--book-reader": options.bookReader = true
            default: options.base = URL(string: argument)!
            }
        }
        if options.bookReader { return try await BookReaderDay.main(options) }
        var results: [String: Any] = [
            "books": options.books, "seconds": options.seconds, "writesPerSecond": options.rate,
        ]
        var rows: [[String: Any]] = []
        for mode in Mode.allCases {
            let result = try await run(mode, options)
            rows.append(result)
            print(summary(result))
        }
        results["modes"] = rows
        let fields = rows[0]
        for row in rows.dropFirst() {
            let ratio = Double(row["renders"] as! Int) / Double(max(1, fields["renders"] as! Int))
            let bytes = Double(row["bytes"] as! Int) / Double(max(1, fields["bytes"] as! Int))
            print(
                String(
                    format: "%@ / fields: %.2fx the renders, %.2fx the bytes", row["mode"] as! String, ratio,
                    bytes))
        }
        if options.check {
            let renders = rows.map { $0["renders"] as! Int }
            let bytes = rows.map { $0["bytes"] as! Int }
            guard (rows[0]["titlesRendered"] as! Int) > 0, renders[0] <= renders[2], bytes[0] <= bytes[1] else {
                print("client-renders: check FAILED")
                exit(1)
            }
            print("client-renders: check passed")
        }
        if let out = options.out {
            let data = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: out))
        }
    }

    static func summary(_ row: [String: Any]) -> String {
        let perView = (row["rendersPerView"] as! [String: Int]).sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "\(row["mode"]!): \(row["renders"]!) renders (\(perView)), \(row["bytes"]!) bytes, "
            + "\(row["frames"]!) frames, \(row["writes"]!) writes; title PATCH-to-render p50 "
            + String(format: "%.1f ms, p99 %.1f ms", row["latencyP50Ms"] as! Double, row["latencyP99Ms"] as! Double)
    }

    /// A view: its body under `withObservationTracking`, run again (once) after a change of
    /// anything it read. In `objectWillChange` mode the body also reads every field of every
    /// object it shows, so any change of those objects re-renders it, as `@Published` would.
    @MainActor
    final class View {
        let name: String
        let body: () -> Void
        var renders = 0
        var alive = true

        init(_ name: String, _ body: @escaping () -> Void) {
            self.name = name
            self.body = body
            render()
            renders = 0
        }

        func render() {
            guard alive else { return }
            renders += 1
            withObservationTracking(body) { [weak self] in
                Task { @MainActor in self?.render() }
            }
        }
    }

    static func touchAll(_ book: Book) { for field in BookField.allCases { _ = book[field] } }
    static func touchAll(_ library: Library) {
        for field in LibraryField.allCases { _ = library[field] }
        _ = library.books
    }

    static func run(_ mode: Mode, _ options: Options) async throws -> [String: Any] {
        let http = HTTPClient.shared
        let base = options.base.absoluteString
        let setup = LibraryClient(baseURL: options.base)
        let library = try await setup.createLibrary { $0.name = "Renders \(mode.rawValue)" }
        let other = try await setup.createLibrary { $0.name = "Elsewhere \(mode.rawValue)" }
        let ids = try await seedBooks(options.books, base: base) { index in
            #"{"libraryId":"\#(library.id.lowercased)","title":"Book \#(index)","author":"Author \#(index % 50)"}"#
        }

        let client = LibraryClient(baseURL: options.base)
        client.watchesEveryField = mode != .fields
        let whole = mode == .objectWillChange
        let model = try await client.library(id: library.id)
        var rendersAt: [String: ContinuousClock.Instant] = [:]
        var views: [String: View] = [:]
        var rowViews: [UUID: View] = [:]
        var retired: [String: Int] = [:]
        func rowView(_ book: Book) -> View {
            View("row") {
                if whole { touchAll(book) }
                let title = book.title
                if rendersAt[title] == nil { rendersAt[title] = .now }
            }
        }
        views["list"] = View("list") {
            if whole { touchAll(model) }
            let members = model.books
            Task { @MainActor in
                let present = Set(members.map(\.id))
                for (id, view) in rowViews where !present.contains(id) {
                    view.alive = false
                    retired["row", default: 0] += view.renders
                    rowViews[id] = nil
                }
                for book in members where rowViews[book.id] == nil { rowViews[book.id] = rowView(book) }
            }
        }
        views["badge"] = View("badge") {
            if whole { touchAll(model) }
            _ = model.bookCount
        }
        views["available"] = View("available") {
            if whole { touchAll(model) }
            _ =
                model.books.filter {
                    if whole { touchAll($0) }
                    return $0.available
                }.count
        }
        var details: [View] = []
        for id in ids.prefix(10) {
            let book = try await client.book(id: id)
            details.append(
                View("detail") {
                    if whole { touchAll(book) }
                    _ = (book.title, book.author, book.available)
                })
        }
        guard await client.settled(timeout: .seconds(120)) else { throw BenchError("the client never settled") }
        while rowViews.count < ids.count { try await Task.sleep(for: .milliseconds(10)) }
        _ = await client.settled(timeout: .seconds(60))
        try await Task.sleep(for: .milliseconds(500))
        for view in Array(views.values) + Array(rowViews.values) + details { view.renders = 0 }
        let bytesBefore = client.streamBytesReceived
        let framesBefore = client.framesApplied

        // The writes: a fixed sequence, paced at the rate, from a task off the main actor.
        var generator = SplitMix(seed: 20_261_126)
        var plan: [Write] = []
        var members = ids
        var created = 0
        let total = Int(options.seconds * options.rate)
        for index in 0..<total {
            let roll = generator.next() % 100
            let pick = members[Int(generator.next() % UInt64(members.count))]
            switch roll {
            case 0..<40: plan.append(.title(pick, "Title \(index)"))
            case 40..<60: plan.append(.author(pick, "Writer \(index)"))
            case 60..<80: plan.append(.available(pick, generator.next() % 2 == 0))
            case 80..<90: plan.append(.move(pick, index % 2 == 0 ? other.id : library.id))
            case 90..<95:
                created += 1
                plan.append(.create("New \(created)"))
            default:
                if members.count > options.books / 2 {
                    members.removeAll { $0 == pick }
                    plan.append(.delete(pick))
                } else {
                    plan.append(.title(pick, "Title \(index)"))
                }
            }
        }
        let libraryID = library.id.lowercased
        let interval = 1.0 / options.rate
        let sentAt = try await Task.detached { () -> [String: ContinuousClock.Instant] in
            var sent: [String: ContinuousClock.Instant] = [:]
            let start = ContinuousClock.now
            for (index, write) in plan.enumerated() {
                try await Task.sleep(until: start + .seconds(Double(index) * interval))
                switch write {
                case .title(let id, let title):
                    sent[title] = .now
                    try await patch(http, base + "/books/" + id.lowercased, #"{"title":"\#(title)"}"#)
                case .author(let id, let author):
                    try await patch(http, base + "/books/" + id.lowercased, #"{"author":"\#(author)"}"#)
                case .available(let id, let flag):
                    try await patch(http, base + "/books/" + id.lowercased, #"{"available":\#(flag)}"#)
                case .move(let id, let target):
                    try await patch(http, base + "/books/" + id.lowercased, #"{"libraryId":"\#(target.lowercased)"}"#)
                case .create(let title):
                    _ = try await post(http, base + "/books", #"{"libraryId":"\#(libraryID)","title":"\#(title)"}"#)
                case .delete(let id):
                    try await send(http, .DELETE, base + "/books/" + id.lowercased, nil, expect: [204, 404])
                }
            }
            return sent
        }.value
        try await Task.sleep(for: .seconds(2))  // the last events arrive and render
        _ = await client.settled(timeout: .seconds(30))

        var perView: [String: Int] = retired
        for view in Array(views.values) + Array(rowViews.values) + details {
            perView[view.name, default: 0] += view.renders
        }
        var latencies: [Double] = []
        for (title, sent) in sentAt {
            guard let rendered = rendersAt[title] else { continue }
            latencies.append((rendered - sent).timeInterval * 1000)
        }
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        let result: [String: Any] = [
            "mode": mode.rawValue,
            "renders": perView.values.reduce(0, +),
            "rendersPerView": perView,
            "bytes": client.streamBytesReceived - bytesBefore,
            "frames": client.framesApplied - framesBefore,
            "writes": plan.count,
            "titlesRendered": latencies.count,
            "titlesWritten": sentAt.count,
            "latencyP50Ms": percentile(0.5),
            "latencyP99Ms": percentile(0.99),
            "streamsOpened": client.streamsOpened,
        ]
        client.close()
        for view in Array(views.values) + Array(rowViews.values) + details { view.alive = false }
        try await send(http, .DELETE, base + "/libraries/" + library.id.lowercased, nil, expect: [204])
        try await send(http, .DELETE, base + "/libraries/" + other.id.lowercased, nil, expect: [204])
        return result
    }

    enum Write: Sendable {
        case title(UUID, String)
        case author(UUID, String)
        case available(UUID, Bool)
        case move(UUID, UUID)
        case create(String)
        case delete(UUID)
    }

    /// Creates `count` books, 16 requests at a time, from `body(index)`; their ids.
    nonisolated static func seedBooks(_ count: Int, base: String, body: @escaping @Sendable (Int) -> String)
        async throws -> [UUID]
    {
        var ids: [UUID] = []
        try await withThrowingTaskGroup(of: UUID.self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask { try await post(.shared, base + "/books", body(index)) }
            }
            for _ in 0..<min(16, count) { add() }
            while let id = try await group.next() {
                ids.append(id)
                if next < count { add() }
            }
        }
        return ids
    }

    nonisolated static func post(_ http: HTTPClient, _ url: String, _ body: String) async throws -> UUID {
        let bytes = try await send(http, .POST, url, body, expect: [201])
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        guard let id = (object?["id"] as? String).flatMap(UUID.init(uuidString:)) else { throw BenchError("no id") }
        return id
    }

    nonisolated static func patch(_ http: HTTPClient, _ url: String, _ body: String) async throws {
        _ = try await send(http, .PATCH, url, body, expect: [200, 404])
    }

    @discardableResult
    nonisolated static func send(
        _ http: HTTPClient, _ method: HTTPMethod, _ url: String, _ body: String?, expect: [Int]
    )
        async throws -> [UInt8]
    {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await http.execute(request, timeout: .seconds(30))
        let buffer = try await response.body.collect(upTo: 1 << 20)
        guard expect.contains(Int(response.status.code)) else {
            throw BenchError("\(method) \(url): \(response.status.code) \(String(buffer: buffer))")
        }
        return Array(buffer.readableBytesView)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A small deterministic generator, so every mode sees the same writes.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Duration {
    var timeInterval: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension UUID {
    var lowercased: String { uuidString.lowercased() }
}
