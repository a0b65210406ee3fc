import HTTPServer
import LibraryDomain
import LiveEngine

extension LibraryAPI {
    /// `GET /books/{id}/events`, `GET /libraries/{id}/events`, `GET /libraries/events` and
    /// `GET /books/events`: a Server-Sent Events stream of the requested fields. Unknown id (404)
    /// and bad `fields`, filters or `Last-Event-ID` (400) are answered as problems before any
    /// stream starts.
    func streamEvents(_ target: SubscriptionRequest.Target, _ exchange: Exchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        var request = try Self.subscription(target, query: query)
        if let text = try Self.lastEventID(exchange, query) {
            guard let seq = Self.sequenceNumber(text) else {
                throw .badRequest("Last-Event-ID must be an event id this server sent (a whole number).")
            }
            request.resumeAfter = seq
        }
        let hub = self.hub
        let resource = Self.describe(request.target)
        let subscription = request
        LiveActor.enqueue {
            guard !exchange.peerHasGone else { return exchange.abandon() }
            hub.subscribe(
                subscription,
                open: { subscriberID in
                    let stream = exchange.openStream(Self.eventStreamHead) {
                        LiveActor.enqueue { hub.unsubscribe(subscriberID, from: subscription.target) }
                    }
                    stream.write(Array("retry: 2000\n\n".utf8))
                    return EventStreamSink(stream: stream, counters: hub.counters)
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

    /// Where a stream resumes: the `Last-Event-ID` header, else the `lastEventId` parameter (for
    /// clients that cannot set headers, such as a new `EventSource`).
    ///
    /// When the header is given the parameter is not read at all: a page that opened its stream
    /// with `?lastEventId=` keeps that URL, and the browser's own reconnects add the header with a
    /// newer id, which must win whatever the old parameter says.
    static func lastEventID(_ exchange: Exchange, _ query: QueryParameters) throws(APIError) -> String? {
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
        }
    }

    static let eventStreamHead = HTTPResponse(
        status: .ok,
        headers: HTTPHeaders([
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
        ])
    )

    /// What a stream's query asks for: `fields`, and for `/books/events` the filters of `GET /books`
    /// (which make the target `.books(filter)`).
    static func subscription(_ target: SubscriptionRequest.Target, query: QueryParameters) throws(APIError)
        -> SubscriptionRequest
    {
        let fields = try query.string("fields")
        switch target {
        case .books:
            let filter = try query.bookFilter()
            let selection = try FieldSelection<BookField>(parsing: fields)
            return SubscriptionRequest(
                target: .books(filter), bookFields: Set(BookField.allCases.filter(selection.contains)), members: true)
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
        case .libraries, .books:
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

/// The wire form of live events: `event:`, `id:` and one `data:` line of JSON; a collection's
/// snapshot as pages of `data:` lines, one item each, whose id comes with the last.
enum EventEncoding {
    static func encode(_ event: LiveEvent) -> [UInt8] {
        var bytes = Array("event: \(event.kind.rawValue)\nid: \(event.seq)\ndata: ".utf8)
        bytes += data(event)
        bytes += [10, 10]
        return bytes
    }

    /// The JSON an event carries (for a collection's snapshot page, see `page`).
    static func data(_ event: LiveEvent) -> [UInt8] {
        var json = JSONWriter()
        json.beginObject()
        if !event.isCollection {
            json.key("id")
            json.string(event.id)
        }
        for (field, value) in event.libraryFields {
            json.key(bytes: JSONKeys.library[field.rawValue])
            json.value(value)
        }
        for (field, value) in event.bookFields {
            json.key(bytes: JSONKeys.book[field.rawValue])
            json.value(value)
        }
        if let members = event.members {
            json.key(event.isCollection ? "items" : "books")
            json.beginArray()
            for index in 0..<members.count { json.member(members, index) }
            json.endArray()
        }
        if let membership = event.membership {
            if !event.isCollection {
                json.key("books")
                json.beginObject()
            }
            if !membership.added.isEmpty {
                json.key("added")
                json.beginArray()
                membership.added.forEach { json.member($0) }
                json.endArray()
            }
            if !membership.removed.isEmpty {
                json.key("removed")
                json.beginArray()
                membership.removed.forEach { json.string($0) }
                json.endArray()
            }
            if !membership.changed.isEmpty {
                json.key("changed")
                json.beginArray()
                membership.changed.forEach { json.member($0) }
                json.endArray()
            }
            if !event.isCollection { json.endObject() }
        }
        json.endObject()
        return json.bytes
    }

    /// One page of a collection's snapshot on a stream of its own: the first page opens the
    /// `snapshot` event and its `items`, each item is a `data:` line (the lines join into one JSON
    /// document), and the last closes them and gives the event its id.
    static func page(_ event: LiveEvent) -> [UInt8] {
        var bytes: [UInt8] = []
        if event.page?.isFirst == true { bytes += Array("event: snapshot\n".utf8) }
        bytes += pageItems(event, opening: Array(#"data: {"items":["#.utf8) + [10])
        if event.page?.isLast == true { bytes += Array("data: ]}\nid: \(event.seq)\n\n".utf8) }
        return bytes
    }

    /// A page's items as `data:` lines, after `opening` on the first page.
    static func pageItems(_ event: LiveEvent, opening: [UInt8]) -> [UInt8] {
        guard let members = event.members else { return [] }
        var bytes: [UInt8] = []
        let first = event.page?.isFirst == true
        if first { bytes += opening }
        for index in 0..<members.count {
            var json = JSONWriter()
            json.member(members, index)
            bytes += Array("data: ".utf8)
            if !(first && index == 0) { bytes.append(UInt8(ascii: ",")) }
            bytes += json.bytes
            bytes.append(10)
        }
        return bytes
    }
}

extension JSONWriter {
    mutating func value(_ value: FieldValue) {
        switch value {
        case .string(let text): string(text)
        case .int(let number): int(number)
        case .bool(let flag): bool(flag)
        case .null: null()
        }
    }

    mutating func member(_ member: LiveEvent.Member) {
        beginObject()
        key("id")
        string(member.id)
        for (field, value) in member.libraryFields {
            key(bytes: JSONKeys.library[field.rawValue])
            self.value(value)
        }
        for (field, value) in member.fields {
            key(bytes: JSONKeys.book[field.rawValue])
            self.value(value)
        }
        endObject()
    }

    /// Member `index` of a snapshot's table.
    mutating func member(_ members: LiveEvent.MemberTable, _ index: Int) {
        beginObject()
        key("id")
        string(members.ids[index])
        for (field, value) in zip(members.fields, members.values(of: index)) {
            key(field)
            self.value(value)
        }
        endObject()
    }
}
