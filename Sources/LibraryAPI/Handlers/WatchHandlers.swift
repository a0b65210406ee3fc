import HTTPServer
import LibraryDomain
import LiveEngine

extension LibraryAPI {
    /// `GET /events?watch=T&watch=…`: many streams on one connection (`Multiplexer`). Every watch
    /// is checked before the stream starts: a bad one is a 400 naming it, an unknown resource a
    /// 404 naming it.
    func streamWatches(_ exchange: Exchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        let watches = query.watches
        guard !watches.isEmpty else {
            throw .badRequest("Give at least one watch, such as /events?watch=/books/{id}?fields=title.")
        }
        guard watches.count <= Multiplexer.maxWatches else {
            throw .badRequest(
                "A stream carries at most \(Multiplexer.maxWatches) watches; this one has \(watches.count).")
        }
        var seen: Set<String> = []
        var requests: [SubscriptionRequest] = []
        for watch in watches {
            guard seen.insert(watch).inserted else { throw Self.badWatch(watch, "is given more than once.") }
            requests.append(try Self.watchRequest(watch))
        }
        let resume = try Self.watchResumePoint(exchange, query)
        let hub = self.hub
        let subscriptions = requests
        LiveActor.enqueue {
            // Requests queue here when many arrive at once: one whose client has hung up meanwhile
            // costs nothing more (no loads, no snapshots).
            guard !exchange.peerHasGone else { return exchange.abandon() }
            let parts = zip(watches, subscriptions).map { Multiplexer.Part(watch: $0, target: $1.target) }
            let multiplexer = Multiplexer(hub: hub, parts: parts, peerHasGone: { exchange.peerHasGone })
            for (part, var request) in zip(parts, subscriptions) {
                let resumed =
                    resume.map { $0.tags == nil || $0.tags!.contains(part.tag) } ?? false
                if resumed { request.resumeAfter = resume!.seq }
                hub.subscribe(
                    request,
                    open: { subscriberID in
                        part.subscriberID = subscriberID
                        return WatchSink(multiplexer: multiplexer, part: part)
                    },
                    outcome: { outcome in
                        LiveActor.enqueue {
                            multiplexer.outcome(
                                part, outcome, resumed: resumed,
                                open: {
                                    exchange.openStream(Self.eventStreamHead) {
                                        LiveActor.enqueue { multiplexer.closed() }
                                    }
                                },
                                fail: { exchange.fail($0) },
                                abandon: { exchange.abandon() })
                        }
                    }
                )
            }
        }
    }

    /// Where a multiplexed stream resumes: `<seq>.<tag>` as the stream sent it (the watches named
    /// by the tag resume, the others start with a snapshot), or a bare `<seq>` (every watch resumes).
    static func watchResumePoint(_ exchange: Exchange, _ query: QueryParameters) throws(APIError)
        -> (seq: Int, tags: Set<String>?)?
    {
        try lastEventID(exchange, query).map { text throws(APIError) in try watchResumePoint(text) }
    }

    static func watchResumePoint(_ text: String) throws(APIError) -> (seq: Int, tags: Set<String>?) {
        let bad = APIError.badRequest(
            "Last-Event-ID must be an event id this stream sent (<seq>.<tag>) or a whole number.")
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let seq = sequenceNumber(parts.first ?? "") else { throw bad }
        guard parts.count == 2 else { return (seq, nil) }
        let tag = Array(parts[1].utf8)
        let length = Multiplexer.watchTagLength
        guard !tag.isEmpty, tag.count % length == 0, tag.count <= length * Multiplexer.maxWatches,
            tag.allSatisfy(isBase64URL)
        else { throw bad }
        let tags = stride(from: 0, to: tag.count, by: length).map {
            String(decoding: tag[$0..<$0 + length], as: UTF8.self)
        }
        return (seq, Set(tags))
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// A watch: the path and query of a single stream without its `/events` suffix.
    static func watchRequest(_ watch: String) throws(APIError) -> SubscriptionRequest {
        guard watch.hasPrefix("/") else {
            throw badWatch(watch, "is not a stream's path; a watch looks like /books/{id}?fields=title.")
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
            return try subscription(target, query: query)
        } catch {
            throw badWatch(watch, error.detail)
        }
    }

    static func badWatch(_ watch: String, _ why: String) -> APIError {
        .badRequest("watch \"\(watch.prefix(300))\": \(why)")
    }
}
