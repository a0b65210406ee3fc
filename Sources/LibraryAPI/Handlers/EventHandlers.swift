import HTTPServer
import LibraryDomain
import LiveEngine

extension LibraryAPI {
    /// `GET /books/{id}/events` and `GET /libraries/{id}/events`: a Server-Sent Events stream of the
    /// requested fields. Unknown id (404) and bad `fields` or `Last-Event-ID` (400) are answered as
    /// problems before any stream starts.
    func streamEvents(_ target: SubscriptionRequest.Target, _ exchange: Exchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        var request = try Self.subscription(target, fields: query.string("fields"))
        let lastEventID = try query.string("lastEventId")
        if let text = exchange.request.headers["last-event-id"] ?? lastEventID {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw .badRequest("Last-Event-ID must be an event id this server sent (a whole number).")
            }
            request.resumeAfter = Int(text)
        }
        let hub = self.hub
        let resource: String
        switch target {
        case .book(let id): resource = "book \(id)"
        case .library(let id): resource = "library \(id)"
        }
        let subscription = request
        LiveActor.enqueue {
            hub.subscribe(
                subscription,
                open: { subscriberID in
                    let stream = exchange.openStream(Self.eventStreamHead) {
                        LiveActor.enqueue { hub.unsubscribe(subscriberID, from: target) }
                    }
                    stream.write(Array("retry: 2000\n\n".utf8))
                    return EventStreamSink(stream: stream, counters: hub.counters)
                },
                outcome: { outcome in
                    switch outcome {
                    case .subscribed: break
                    case .notFound: exchange.fail(APIError.notFound("No \(resource) exists."))
                    case .failed(let error): exchange.fail(APIError(error, resource: resource))
                    }
                }
            )
        }
    }

    static let eventStreamHead = HTTPResponse(
        status: .ok,
        headers: HTTPHeaders([
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
        ])
    )

    /// Reads `fields`: for a book, its field names; for a library, its own field names, `books`
    /// (the membership) and `books.<book field>`. No `fields` means everything (for a library: its
    /// fields and the membership, each member as its id).
    static func subscription(_ target: SubscriptionRequest.Target, fields text: String?) throws(APIError)
        -> SubscriptionRequest
    {
        switch target {
        case .book:
            let selection = try FieldSelection<BookField>(parsing: text)
            return SubscriptionRequest(target: target, bookFields: Set(BookField.allCases.filter(selection.contains)))
        case .library:
            guard let text else {
                return SubscriptionRequest(target: target, libraryFields: Set(LibraryField.allCases), members: true)
            }
            var request = SubscriptionRequest(target: target)
            for name in text.split(separator: ",", omittingEmptySubsequences: false) {
                if let field = LibraryField(rawValue: String(name)) {
                    request.libraryFields.insert(field)
                } else if name == "books" {
                    request.members = true
                } else if name.hasPrefix("books."), let field = BookField(rawValue: String(name.dropFirst(6))) {
                    request.members = true
                    request.bookFields.insert(field)
                } else {
                    let valid =
                        LibraryField.allCases.map(\.rawValue) + ["books"]
                        + BookField.allCases.map { "books.\($0.rawValue)" }
                    let shown = name.isEmpty ? "an empty name" : "\"\(name)\""
                    throw .badRequest("fields has \(shown); valid fields are: \(valid.joined(separator: ", ")).")
                }
            }
            return request
        }
    }
}

/// The wire form of live events: `event:`, `id:` and one `data:` line of JSON.
enum EventEncoding {
    static func encode(_ event: LiveEvent) -> [UInt8] {
        var json = JSONWriter()
        json.beginObject()
        json.key("id")
        json.string(event.id)
        for (field, value) in event.libraryFields {
            json.key(field.rawValue)
            json.value(value)
        }
        for (field, value) in event.bookFields {
            json.key(field.rawValue)
            json.value(value)
        }
        if let members = event.members {
            json.key("books")
            json.beginArray()
            for index in 0..<members.count {
                json.beginObject()
                json.key("id")
                json.string(members.ids[index])
                for (field, value) in zip(members.fields, members.values(of: index)) {
                    json.key(field.rawValue)
                    json.value(value)
                }
                json.endObject()
            }
            json.endArray()
        }
        if let membership = event.membership {
            json.key("books")
            json.beginObject()
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
            json.endObject()
        }
        json.endObject()
        var bytes = Array("event: \(event.kind.rawValue)\nid: \(event.seq)\ndata: ".utf8)
        bytes += json.bytes
        bytes += [10, 10]
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
        for (field, value) in member.fields {
            key(field.rawValue)
            self.value(value)
        }
        endObject()
    }
}
