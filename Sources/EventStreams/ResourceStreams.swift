import APICore
import HTTPServer
import LibraryDomain
import LiveEngine

extension EventStreams {
    /// `GET /books/{id}/events`, `GET /libraries/{id}/events`, `GET /libraries/events` and
    /// `GET /books/events`: a Server-Sent Events stream of the requested fields. Unknown id (404)
    /// and bad `fields`, filters or `Last-Event-ID` (400) are answered as problems before any
    /// stream starts.
    package func streamEvents(_ target: SubscriptionRequest.Target, _ exchange: any StreamExchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        let principal = exchange.principal
        var request = try Self.restricted(Self.subscription(target, query: query), to: principal.rights)
        if let text = try Self.lastEventID(exchange, query) {
            guard let seq = Self.sequenceNumber(text) else {
                throw .badRequest("Last-Event-ID must be an event id this server sent (a whole number).")
            }
            request.resumeAfter = seq
        }
        let (hub, deadlines) = (self.hub, self.deadlines)
        let resource = Self.describe(request.target)
        let subscription = request
        LiveActor.enqueue {
            guard !exchange.peerHasGone else { return exchange.abandon() }
            hub.subscribe(
                subscription,
                open: { subscriberID in
                    guard let expires = principal.expires else {
                        let stream = exchange.openStream(Self.eventStreamHead) {
                            LiveActor.enqueue { hub.unsubscribe(subscriberID, from: subscription.target) }
                        }
                        stream.write(EventEncoding.opening)
                        return EventStreamSink(stream: stream, counters: hub.counters)
                    }
                    // Made before the stream, so that its close can cancel it; given its sink after.
                    let deadline = deadlines.reserve(at: expires)
                    let stream = exchange.openStream(Self.eventStreamHead) {
                        LiveActor.enqueue {
                            hub.unsubscribe(subscriberID, from: subscription.target)
                            deadlines.cancel(deadline)
                        }
                    }
                    stream.write(EventEncoding.opening)
                    let sink = EventStreamSink(stream: stream, counters: hub.counters)
                    deadlines.arm(deadline, sink)
                    return sink
                },
                outcome: { outcome in
                    switch outcome {
                    case .subscribed: break
                    case .notFound, .deletedBeyondHistory, .absentWithoutTrace:
                        exchange.fail(APIError.notFound("No \(resource) exists."))
                    case .failed(let error): exchange.fail(APIError(error, resource: resource))
                    }
                }
            )
        }
    }

    /// `request` as `rights` may see it: of the libraries they read. A collection filtered by a
    /// library they cannot read is a 404, as `GET /books?libraryId=` is: decided by the rights
    /// alone, so it says nothing of whether that library exists. (A library or book they cannot
    /// read is answered by the hub as one that does not exist.)
    static func restricted(_ request: SubscriptionRequest, to rights: AccessRights, watch: String? = nil)
        throws(APIError) -> SubscriptionRequest
    {
        guard let readable = rights.readable else { return request }
        switch request.target {
        case .books(let filter): try rights.checkReadable(filteredBy: filter.library, watch: watch)
        case .window(let window): try rights.checkReadable(filteredBy: window.query.filter.library, watch: watch)
        case .book, .library, .libraries: break
        }
        var restricted = request
        restricted.readable = readable
        return restricted
    }

    /// Where a stream resumes: the `Last-Event-ID` header, else the `lastEventId` parameter (for
    /// clients that cannot set headers, such as a new `EventSource`).
    ///
    /// When the header is given the parameter is not read at all: a page that opened its stream
    /// with `?lastEventId=` keeps that URL, and the browser's own reconnects add the header with a
    /// newer id, which must win whatever the old parameter says.
    static func lastEventID(_ exchange: any StreamExchange, _ query: QueryParameters) throws(APIError) -> String? {
        if let header = exchange.request.headers["last-event-id"] { return header }
        return try query.string("lastEventId")
    }

    /// An event id of a single stream: a whole number of at most 18 digits.
    static func sequenceNumber(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int(text)
    }

    static func sequenceNumber(_ text: String) -> Int? { sequenceNumber(Substring(text)) }

    static func describe(_ target: SubscriptionRequest.Target) -> String {
        switch target {
        case .book(let id): "book \(id)"
        case .library(let id): "library \(id)"
        case .libraries: "libraries"
        case .books: "books"
        case .window: "window of books"
        }
    }

    static let eventStreamHead = HTTPResponse(
        status: .ok,
        headers: HTTPHeaders([
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
        ])
    )

    /// The parameters of `GET /books` that make `/books/events` a window of the list.
    static let windowParameters = ["sort", "q", "limit", "cursor"]

    /// What a stream's query asks for: `fields`, and for `/books/events` the filters of `GET /books`
    /// (which make the target `.books(filter)`), and its `sort`, `q`, `limit` and `cursor` (which
    /// make it `.window`).
    static func subscription(_ target: SubscriptionRequest.Target, query: QueryParameters) throws(APIError)
        -> SubscriptionRequest
    {
        let fields = try query.string("fields")
        switch target {
        case .books, .window:
            let filter = try query.bookFilter()
            let selection = try FieldSelection<BookField>(parsing: fields)
            var bookFields = Set(BookField.allCases.filter(selection.contains))
            // With any of a list's `sort`, `q`, `limit` or `cursor`, a window of the list.
            guard windowParameters.contains(where: query.names.contains) else {
                return SubscriptionRequest(target: .books(filter), bookFields: bookFields, members: true)
            }
            let order = try query.order(of: BookField.self)
            let window = BookWindow(
                BookQuery(filter, search: try query.search(), order: order), start: try query.start(in: order),
                limit: try query.limit())
            // Its items always carry the sort field, so that a client places them by the order alone.
            if let order { bookFields.insert(order.field) }
            return SubscriptionRequest(target: .window(window), bookFields: bookFields, members: true)
        case .libraries:
            let selection = try FieldSelection<LibraryField>(parsing: fields)
            return SubscriptionRequest(
                target: target, libraryFields: Set(LibraryField.allCases.filter(selection.contains)), members: true)
        case .book, .library:
            return try subscription(target, fields: fields)
        }
    }

    /// Reads `fields`: for a book, its field names; for a library, its own field names, `books`
    /// (the membership) and `books.<book field>`. No `fields` means everything (for a library: its
    /// fields and the membership, each member as its id).
    static func subscription(_ target: SubscriptionRequest.Target, fields text: String?) throws(APIError)
        -> SubscriptionRequest
    {
        switch target {
        case .libraries, .books, .window:
            preconditionFailure("collections are read by subscription(_:query:)")
        case .book:
            let selection = try FieldSelection<BookField>(parsing: text)
            return SubscriptionRequest(target: target, bookFields: Set(BookField.allCases.filter(selection.contains)))
        case .library:
            guard let text else {
                return SubscriptionRequest(target: target, libraryFields: Set(LibraryField.allCases), members: true)
            }
            var request = SubscriptionRequest(target: target)
            for name in text.split(separator: ",", omittingEmptySubsequences: false) {
                if let field = LibraryField(named: name) {
                    request.libraryFields.insert(field)
                } else if name == "books" {
                    request.members = true
                } else if name.hasPrefix("books."), let field = BookField(named: name.dropFirst(6)) {
                    request.members = true
                    request.bookFields.insert(field)
                } else {
                    let valid =
                        LibraryField.allCases.map(\.name) + ["books"]
                        + BookField.allCases.map { "books.\($0.name)" }
                    let shown = name.isEmpty ? "an empty name" : "\"\(name)\""
                    throw .badRequest("fields has \(shown); valid fields are: \(valid.joined(separator: ", ")).")
                }
            }
            return request
        }
    }
}
