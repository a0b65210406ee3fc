import APICore
import LibraryDomain
import LiveEngine

/// The watch grammar: a watch is the path and query of a single stream without its `/events`
/// suffix (`/books/{id}?fields=title`, `/libraries/{id}?fields=name,books.title`,
/// `/libraries?fields=name`, `/books?libraryId={id}&author=…&fields=title`). One parser
/// (`watchRequest`) and one printer (`watchText`), held with the Swift client's and the console's
/// printers to one table of cases (`Tests/WatchGrammar/cases.json`).
extension EventStreams {
    /// A watch: the path and query of a single stream without its `/events` suffix.
    static func watchRequest(_ watch: String) throws(APIError) -> SubscriptionRequest {
        guard watch.utf8.count <= maxWatchLength else {
            throw badWatch(
                watch, "is longer than \(maxWatchLength) bytes; a stream repeats a watch's text in every entry.")
        }
        guard watch.hasPrefix("/") else {
            throw badWatch(watch, "is not a stream's path; a watch looks like /libraries/{id}?fields=name.")
        }
        let pieces = watch.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let route: Route
        let query: QueryParameters
        do throws(APIError) {
            route = try Route(path: pieces[0])
            query = try QueryParameters(pieces.count > 1 ? pieces[1] : nil)
        } catch {
            throw badWatch(watch, error.detail)
        }
        let target: SubscriptionRequest.Target
        switch route {
        case .book(let id): target = .book(id)
        case .library(let id): target = .library(id)
        case .libraries: target = .libraries
        case .books: target = .books(BookFilter())
        default:
            throw badWatch(
                watch, "is not something to watch: /books/{id}, /libraries/{id}, /libraries or /books, with a query.")
        }
        do throws(APIError) {
            guard query.watches.isEmpty else { throw APIError.badRequest("a watch cannot carry watches.") }
            guard try query.string("lastEventId") == nil else {
                throw APIError.badRequest("a watch carries no lastEventId; the stream's Last-Event-ID resumes it.")
            }
            // A stream repeats a watch's text in every entry, and a parameter that means nothing
            // would make one target many watches: a watch takes only what it uses.
            var known = ["fields"]
            if case .books = target { known += BookField.filterable.map(\.name) + windowParameters }
            if let unknown = query.names.first(where: { !known.contains($0) }) {
                throw APIError.badRequest(
                    "\"\(unknown.prefix(100))\" is not a parameter of a watch; it takes \(known.joined(separator: ", "))."
                )
            }
            return try subscription(target, query: query)
        } catch {
            throw badWatch(watch, error.detail)
        }
    }

    /// The watch of `request`, spelled as every printer spells it: the filters of `/books` and
    /// the fields in the field table's order, each filter's value percent-encoded but for ASCII
    /// letters, digits and `-._~`; `fields=id` when only existence is asked; a library's own
    /// fields, then `books` (the membership alone) or each `books.<field>`.
    package static func watchText(_ request: SubscriptionRequest) -> String {
        var parameters: [String] = []
        var names: [String] = []
        let path: String
        switch request.target {
        case .book(let id):
            path = "/books/" + id
        case .library(let id):
            path = "/libraries/" + id
        case .libraries:
            path = "/libraries"
        case .books(let filter):
            path = "/books"
            parameters = filterParameters(filter)
        case .window(let window):
            path = "/books"
            parameters = filterParameters(window.query.filter)
            if let order = window.query.order { parameters.append("sort=" + order.text) }
            if let search = window.query.search { parameters.append("q=" + Self.percentEncoded(search.text)) }
            parameters.append("limit=\(window.limit)")
            switch window.start {
            case .seq(0), .sorted(nil): break
            case .seq(let seq): parameters.append("cursor=" + Cursor.encode(seq))
            case .sorted(let position?): parameters.append("cursor=" + Cursor.encode(position, in: window.query.order!))
            }
        }
        names += LibraryField.allCases.filter { $0 != .id && request.libraryFields.contains($0) }.map(\.name)
        switch request.target {
        case .book, .books, .window:
            names += BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }.map(\.name)
        case .library:
            let members = BookField.allCases.filter { $0 != .id && request.bookFields.contains($0) }
            if !members.isEmpty {
                names += members.map { "books." + $0.name }
            } else if request.members {
                names.append("books")
            }
        case .libraries:
            break
        }
        parameters.append("fields=" + (names.isEmpty ? "id" : names.joined(separator: ",")))
        return path + "?" + parameters.joined(separator: "&")
    }

    /// The filters of `/books`, in the field table's order, each value percent-encoded.
    private static func filterParameters(_ filter: BookFilter) -> [String] {
        BookField.filterable.compactMap { field in
            switch filter[field] {
            case .string(let text): field.name + "=" + Self.percentEncoded(text)
            case .int(let number): field.name + "=\(number)"
            case .bool(let truth): field.name + "=\(truth)"
            case .null, nil: nil
            }
        }
    }

    /// `text` with every byte but ASCII letters, digits and `-._~` as `%XX` (RFC 3986's unreserved
    /// characters): what the client's and the console's printers send.
    static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The longest watch text, in bytes: every entry of a frame carries it.
    static let maxWatchLength = 2_048

    static func badWatch(_ watch: String, _ why: String) -> APIError {
        .badRequest("watch \"\(watch.prefix(300))\": \(why)")
    }
}

/// What a watch names, however its text spells it: its target and its fields. A stream carries
/// each at most once.
struct WatchKey: Hashable {
    let target: LiveTarget
    let libraryFields: Set<LibraryField>
    let bookFields: Set<BookField>
    let members: Bool

    init(_ request: SubscriptionRequest) {
        target = request.target
        libraryFields = request.libraryFields
        bookFields = request.bookFields
        members = request.members
    }
}
