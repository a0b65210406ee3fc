import APICore
import Digest
import HTTPServer
import JSON
import LibraryDomain
import LiveEngine

extension EventStreams {
    /// `GET /events?watch=T&watch=…`: many streams on one connection (`Multiplexer`). Every watch
    /// is checked before the stream starts: a bad one is a 400 naming it, an unknown resource a
    /// 404 naming it.
    package func streamWatches(_ exchange: any StreamExchange) throws(APIError) {
        let query = try QueryParameters(exchange.request.query)
        let watches = query.watches
        guard !watches.isEmpty else {
            throw .badRequest("Give at least one watch, such as /events?watch=/libraries/{id}?fields=name.")
        }
        guard watches.count <= Multiplexer.maxWatches else {
            throw .badRequest(
                "A stream carries at most \(Multiplexer.maxWatches) watches; this one has \(watches.count).")
        }
        let requests = try Self.watchRequests(watches, rights: exchange.principal.rights)
        openWatches(exchange, watches, requests, resume: try Self.watchResumePoint(exchange, query), tagged: true)
    }

    /// `POST /events` with `{"watches": [...], "lastEventId": "<seq>", "resume": [...]}`: the same
    /// stream as `GET /events`, for clients whose watches do not fit a URL (up to
    /// `Multiplexer.maxPostedWatches`). Frame ids are bare `<seq>`; the next request's body names
    /// the watches that resume after it (all of them when `resume` is absent), and the others get
    /// their snapshot. `Last-Event-ID` is not read: the body says where to resume.
    package func streamPostedWatches(_ exchange: any StreamExchange) throws(APIError) {
        let body = try PostedWatches(exchange.request)
        guard body.watches.count <= Multiplexer.maxPostedWatches else {
            throw .badRequest(
                "A stream carries at most \(Multiplexer.maxPostedWatches) watches; this one has \(body.watches.count).")
        }
        let requests = try Self.watchRequests(body.watches, rights: exchange.principal.rights)
        let resume = body.lastEventId.map { seq in
            (seq: seq, tags: body.resume.map { Set($0.map(Multiplexer.watchTag)) })
        }
        openWatches(exchange, body.watches, requests, resume: resume, tagged: false)
    }

    /// `POST /events/{streamId}` with `{"add": [...], "remove": [...]}`: changes the watches of an
    /// open `POST /events` stream without a new connection. Added watches get their `snapshot` in
    /// a later frame of the stream (or a `delete` entry when their resource is gone); removed ones
    /// get nothing more. `204` once the change is made; `404` when no such stream is open here
    /// (it ended, or another replica holds it): the client opens a new stream instead.
    ///
    /// Only the principal that opened the stream may change it (another is a 403). Its credential
    /// replaces the stream's, so a client extends a stream before its token expires by calling
    /// with a new token (`{}` changes nothing else): the stream then ends when the new one
    /// expires, and when the new rights are narrower the watches they no longer cover end with a
    /// `revoked` entry. Added watches are checked against the new rights, as at the opening.
    package func changeWatches(of streamID: String, _ exchange: any StreamExchange) throws(APIError) {
        let body = try WatchChanges(exchange.request)
        let principal = exchange.principal
        let added = Array(zip(body.add, try Self.watchRequests(body.add, rights: principal.rights)))
        LiveActor.enqueue {
            guard let multiplexer = Multiplexer.open[streamID] else {
                return exchange.fail(
                    APIError.notFound("No stream \(streamID) is open on this server; open a new one with POST /events.")
                )
            }
            guard multiplexer.principal.subject == principal.subject else {
                return exchange.fail(
                    APIError(.forbidden, "forbidden", "Stream \(streamID) was opened by another principal."))
            }
            let adding = added.map { (watch: $0.0, request: $0.1) }
            if let refusal = multiplexer.refusal(removing: body.remove, adding: adding) {
                return exchange.fail(refusal)
            }
            multiplexer.adopt(principal)
            multiplexer.remove(body.remove)
            multiplexer.add(adding)
            exchange.finish(HTTPResponse(status: .noContent))
        }
    }

    /// The head of a multiplexed stream, with its `Stream-Id` when it has one.
    private static func eventStreamHead(streamID: String?) -> HTTPResponse {
        var head = eventStreamHead
        if let streamID { head.headers.set("Stream-Id", streamID) }
        return head
    }

    /// Each watch checked and turned into its subscription. The same watch twice is a 400, and so
    /// are two that name one target and fields however they are spelled (`fields=a,b` and
    /// `fields=b,a`): the stream would build and send the same snapshot and events twice.
    private static func watchRequests(_ watches: [String], rights: AccessRights) throws(APIError)
        -> [SubscriptionRequest]
    {
        var seen: [WatchKey: String] = [:]
        var perTarget: [LiveTarget: Int] = [:]
        var requests: [SubscriptionRequest] = []
        requests.reserveCapacity(watches.count)
        seen.reserveCapacity(watches.count)
        for watch in watches {
            let request = try Self.restricted(Self.watchRequest(watch), to: rights, watch: watch)
            if let first = seen.updateValue(watch, forKey: WatchKey(request)) {
                guard first != watch else { throw Self.badWatch(watch, "is given more than once.") }
                throw Self.badWatch(watch, "names what \"\(first.prefix(300))\" names.")
            }
            perTarget[request.target, default: 0] += 1
            guard perTarget[request.target]! <= Multiplexer.maxWatchesPerTarget else {
                throw Self.badWatch(watch, perTargetRefusal(request.target))
            }
            requests.append(request)
        }
        return requests
    }

    /// Why a watch past `Multiplexer.maxWatchesPerTarget` of its target is refused.
    static func perTargetRefusal(_ target: LiveTarget) -> String {
        "is one watch too many of one target (\(describe(target))): a stream carries at most "
            + "\(Multiplexer.maxWatchesPerTarget) of one target, whatever their fields (each is a snapshot of its own)."
    }

    private func openWatches(
        _ exchange: any StreamExchange, _ watches: [String], _ subscriptions: [SubscriptionRequest],
        resume: (seq: Int, tags: Set<String>?)?, tagged: Bool
    ) {
        let (hub, deadlines, principal) = (self.hub, self.deadlines, exchange.principal)
        LiveActor.enqueue {
            // Requests queue here when many arrive at once: one whose client has hung up meanwhile
            // costs nothing more (no loads, no snapshots).
            guard !exchange.peerHasGone else { return exchange.abandon() }
            let parts = zip(watches, subscriptions).map { Multiplexer.Part(watch: $0, request: $1) }
            let multiplexer = Multiplexer(
                hub: hub, parts: parts, principal: principal, deadlines: deadlines, tagged: tagged,
                peerHasGone: { exchange.peerHasGone })
            // A stream opened by POST can change its watches later (`POST /events/{streamId}`).
            let streamID = tagged ? nil : Identifier.make()
            multiplexer.streamID = streamID
            let head = Self.eventStreamHead(streamID: streamID)
            for (part, var request) in zip(parts, subscriptions) {
                let resumed =
                    resume.map { $0.tags == nil || $0.tags!.contains(part.tag) } ?? false
                if resumed { request.resumeAfter = resume!.seq }
                let answer: @Sendable (LiveHub.Outcome) -> Void = { outcome in
                    LiveActor.enqueue {
                        multiplexer.outcome(
                            part, outcome, resumed: resumed,
                            open: {
                                if let streamID { Multiplexer.open[streamID] = multiplexer }
                                multiplexer.scheduleExpiry()
                                return exchange.openStream(head) {
                                    LiveActor.enqueue { multiplexer.closed() }
                                }
                            },
                            fail: { exchange.fail($0) },
                            abandon: { exchange.abandon() })
                    }
                }
                // A collection watch queued behind another's snapshot is answered now: a
                // collection subscription cannot be refused, and the stream waits for its first
                // events as for any watch's.
                if multiplexer.subscribe(part, request, outcome: answer) { answer(.subscribed) }
            }
        }
    }

    /// Where a multiplexed stream resumes: `<seq>.<tag>` as the stream sent it (the watches named
    /// by the tag resume, the others start with a snapshot), or a bare `<seq>` (every watch resumes).
    static func watchResumePoint(_ exchange: any StreamExchange, _ query: QueryParameters) throws(APIError)
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
            Base64URL.decode(tag) != nil  // whole tags: 16 characters are 12 bytes, no bits left over
        else { throw bad }
        let tags = stride(from: 0, to: tag.count, by: length).map {
            String(decoding: tag[$0..<$0 + length], as: UTF8.self)
        }
        return (seq, Set(tags))
    }

}

/// The body of `POST /events`.
package struct PostedWatches {
    var watches: [String] = []
    var lastEventId: Int?
    var resume: [String]?

    package init(_ request: HTTPRequest) throws(APIError) {
        let members = try RequestBody.members(of: request)
        var errors: [FieldError] = []
        var watchesSeen = false
        for (key, value) in members {
            switch key {
            case "watches":
                watchesSeen = true
                if let list = Self.strings(value), !list.isEmpty {
                    watches = list
                } else {
                    errors.append(FieldError("watches", "must be a non-empty array of watches (strings)"))
                }
            case "lastEventId":
                if case .string(let text) = value, let seq = EventStreams.sequenceNumber(text) {
                    lastEventId = seq
                } else {
                    errors.append(
                        FieldError("lastEventId", "must be an id this stream sent (a whole number, as a string)"))
                }
            case "resume":
                if let list = Self.strings(value) {
                    resume = list
                } else {
                    errors.append(FieldError("resume", "must be an array of watches (strings)"))
                }
            default:
                let name = key.count > 100 ? key.prefix(100) + "…" : key
                errors.append(FieldError(name, "is not a member of this body (watches, lastEventId, resume)"))
            }
        }
        if !watchesSeen { errors.append(FieldError("watches", "is required")) }
        if resume != nil, lastEventId == nil {
            errors.append(FieldError("resume", "needs lastEventId, the id the resumed watches are at"))
        }
        if let resume, errors.isEmpty {
            let given = Set(watches)
            if let stranger = resume.first(where: { !given.contains($0) }) {
                errors.append(
                    FieldError("resume", "names \"\(stranger.prefix(300))\", which is not one of the watches"))
            }
        }
        guard errors.isEmpty else { throw .invalid(errors) }
    }

    static func strings(_ value: JSONValue) -> [String]? {
        guard case .array(let items) = value else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(items.count)
        for item in items {
            guard case .string(let text) = item else { return nil }
            strings.append(text)
        }
        return strings
    }
}

/// The body of `POST /events/{streamId}`: watches to add and to remove, each listed once.
package struct WatchChanges {
    var add: [String] = []
    var remove: [String] = []

    package init(_ request: HTTPRequest) throws(APIError) {
        let members = try RequestBody.members(of: request)
        var errors: [FieldError] = []
        for (key, value) in members {
            switch key {
            case "add", "remove":
                guard let list = PostedWatches.strings(value) else {
                    errors.append(FieldError(key, "must be an array of watches (strings)"))
                    continue
                }
                if key == "add" { add = list } else { remove = list }
            default:
                let name = key.count > 100 ? key.prefix(100) + "…" : key
                errors.append(FieldError(name, "is not a member of this body (add, remove)"))
            }
        }
        if errors.isEmpty, Set(add).count != add.count || Set(remove).count != remove.count {
            errors.append(FieldError(Set(add).count != add.count ? "add" : "remove", "lists a watch more than once"))
        }
        if errors.isEmpty, let both = add.first(where: Set(remove).contains) {
            errors.append(FieldError("remove", "names \"\(both.prefix(300))\", which add names too"))
        }
        guard errors.isEmpty else { throw .invalid(errors) }
    }
}
