import Foundation
import JSON
import LibraryModel
import NIOHTTP1
import ServerSentEvents

/// What a watch of the stream stands for.
enum WatchTarget: Sendable, Hashable {
    case book(UUID)
    case library(UUID)
    case books(String)
    /// Every library.
    case libraries
}

/// The live side of a client: the open stream, its watches and where it is in the change sequence.
struct LiveState {
    /// Bumped whenever a stream is replaced or closed: what an older stream still delivers is dropped.
    var generation = 0
    var streamTask: Task<Void, Never>?
    /// The watches of the stream open or opening, and what each stands for.
    var watches: [String: WatchTarget] = [:]
    /// Watches whose state the models hold as of `lastSeq`: they resume on the next stream.
    var established: Set<String> = []
    /// New watches of the open stream, established once its first frame is applied.
    var awaitingSnapshot: Set<String> = []
    /// Watches of the open stream whose resource was deleted (the server sends nothing more for them).
    var ended: Set<String> = []
    /// The id of the last frame applied.
    var lastSeq: Int?
    var reconcileScheduled = false
    /// Attempts that failed in a row, for the backoff.
    var failures = 0
    /// The server's `retry:`, the first reconnection delay.
    var retry: Duration = .milliseconds(EventStreamFraming.reconnectionMilliseconds)
    var lastActivity = ContinuousClock.now
    var closed = false
    /// Whether a reconnection waits out its backoff (demand changes then wait for it too).
    var backingOff = false
    /// Streams opened, for tests and the benchmark.
    var streamsOpened = 0
    /// The open stream's `Stream-Id`, once its head arrived: its watches change through
    /// `POST /events/{streamId}` without a new connection.
    var streamID: String?
    /// A change of watches is in flight on the side channel.
    var changing = false
    /// Demand changed while the stream was opening or a change was in flight: reconcile after.
    var reconcileAgain = false
    /// Watch changes made on the side channel, for tests and the benchmark.
    var watchChanges = 0
    /// Bytes of event-stream bodies received, for the benchmark.
    var bytesReceived = 0
    /// Frames applied.
    var framesApplied = 0
    /// With a token provider: the token the open stream was opened or last extended with.
    var streamToken: String?
    /// A `401` on opening was answered by asking the provider again: a second one backs off.
    var authRetried = false
    /// The task that hands the open stream a new token before its own expires.
    var refreshTask: Task<Void, Never>?
    /// Tokens handed to open streams ahead of their expiry, for tests.
    var tokensRefreshed = 0
}

/// What the reader hands the main actor.
enum StreamItem: Sendable {
    case frame(seq: Int?, entries: [(watch: String, event: String, data: JSONValue)])
    case retry(Int)
    case activity(bytes: Int)
    /// The stream's token expired: the server ends the stream.
    case expired
}

extension LibraryClient {
    /// Some model's demand grew, or a model went: the stream moves to the new watch set after
    /// `demandBatching`, so a screen of views that read at once opens one stream, not one each.
    func demandChanged() {
        guard !live.reconcileScheduled, !live.closed else { return }
        live.reconcileScheduled = true
        Task {
            try? await Task.sleep(for: demandBatching)
            live.reconcileScheduled = false
            reconcile()
        }
    }

    /// The watches every held model's demand asks for; released models leave the identity map here.
    func desiredWatches() -> [String: WatchTarget] {
        var watches: [String: WatchTarget] = [:]
        for (id, box) in books {
            guard let book = box.value else {
                books[id] = nil
                continue
            }
            guard let fields = book.storage.watchedFields else { continue }
            let path = "/books/" + id.lowercased
            watches[watchesEveryField ? path : WatchText.book(id.lowercased, fields: fields)] = .book(id)
        }
        for (id, box) in libraryModels {
            guard let library = box.value else {
                libraryModels[id] = nil
                continue
            }
            let fields = library.storage.watchedFields
            let members = library.membership.demanded
            guard !library.storage.wasDeleted, fields != nil || members else { continue }
            let path = "/libraries/" + id.lowercased
            watches[
                watchesEveryField ? path : WatchText.library(id.lowercased, fields: fields ?? [], members: members)] =
                .library(id)
        }
        if let box = libraryList {
            if let list = box.value {
                if list.membership.demanded { watches[WatchText.libraries] = .libraries }
            } else {
                libraryList = nil
            }
        }
        for (key, box) in collections {
            guard let collection = box.value else {
                collections[key] = nil
                continue
            }
            guard collection.membership.demanded else { continue }
            watches[WatchText.books(key: key)] = .books(key)
        }
        return watches
    }

    /// Opens, replaces or closes the stream so that it carries exactly the demanded watches.
    func reconcile() {
        guard !live.closed, !live.backingOff else { return }
        let desired = desiredWatches()
        let wanted = Set(desired.keys)
        let current = Set(live.watches.keys)
        if live.streamTask != nil, wanted.isSubset(of: current), current.subtracting(wanted).isSubset(of: live.ended) {
            return
        }
        if live.streamTask != nil, !desired.isEmpty, live.streamID == nil || live.changing {
            // The stream is opening, or a change is in flight: this one follows it.
            live.reconcileAgain = true
            return
        }
        if let streamID = live.streamID, !desired.isEmpty {
            return change(streamID, to: desired)
        }
        guard !desired.isEmpty else {
            live.generation += 1
            dropStream(cancelling: true)
            connection = .idle
            return
        }
        open(desired)
    }

    /// A new stream for `watches`: those the models already hold resume after `lastSeq`, the
    /// others start with their snapshot.
    private func open(_ watches: [String: WatchTarget]) {
        live.generation += 1
        live.streamTask?.cancel()
        let generation = live.generation
        let resumed = live.lastSeq == nil ? [] : live.established.intersection(watches.keys)
        live.watches = watches
        live.streamID = nil
        live.changing = false
        live.reconcileAgain = false
        live.ended = []
        live.established = resumed
        live.awaitingSnapshot = Set(watches.keys).subtracting(resumed)
        live.streamsOpened += 1
        if connection != .live { connection = .connecting }
        var body: [String: JSONValue] = ["watches": .array(watches.keys.sorted().map(JSONValue.string))]
        if let seq = live.lastSeq, !resumed.isEmpty {
            body["lastEventId"] = .string(String(seq))
            body["resume"] = .array(resumed.sorted().map(JSONValue.string))
        }
        var headers = [("Accept", "text/event-stream"), ("Content-Type", "application/json")]
        if tokens == nil, let token = readToken ?? apiToken { headers.append(("Authorization", "Bearer " + token)) }
        let request = TransportRequest(
            method: .POST, path: "/events", headers: headers, body: JSONValue(object: body))
        let client = WeakBox(self)
        let transport = self.transport
        live.streamTask = Task { await Self.run(client, generation, request, transport) }
        lifetime.hold(live.streamTask)
    }

    /// One stream, from its request to its end. Holds the client weakly, so that a client the app
    /// let go of stops (its deinit cancels this task).
    private static func run(
        _ client: WeakBox<LibraryClient>, _ generation: Int, _ request: TransportRequest,
        _ transport: any ClientTransport
    ) async {
        var request = request
        var token: String?
        if let tokens = client.value?.tokens {
            do {
                token = try await tokens.token()
            } catch {
                client.value?.failed(generation, error.detail)
                return
            }
            request.headers.append(("Authorization", "Bearer " + token!))
            guard let client = client.value, generation == client.live.generation else { return }
            client.live.streamToken = token
        }
        var answered: StreamOpening?
        for attempt in 1...2 {
            do throws(LibraryClientError) {
                answered = try await transport.openStream(request)
                break
            } catch {
                // A pooled connection the server closed as the request went out (as a stream ends
                // at its token's expiry) fails at once: one more try, on a new connection, before
                // it counts as a failure and backs off.
                guard attempt == 1, let current = client.value, generation == current.live.generation else {
                    client.value?.failed(generation, "no answer: \(error.detail)")
                    return
                }
            }
        }
        switch answered {
        case nil: return
        case .refused(let answer):
            if answer.status == 401, let token, let tokens = client.value?.tokens { await tokens.refused(token) }
            client.value?.refused(generation, answer)
        case .opened(let streamID, let items, let stop):
            guard client.value?.opened(generation, streamID: streamID, stop: stop) == true else { return stop() }
            for await item in items {
                guard let client = client.value, generation == client.live.generation else { break }
                client.apply(item)
            }
            stop()
            client.value?.failed(generation, "the stream ended")
        }
    }

    /// The stream's head arrived: its id and the live state; false when the stream was replaced
    /// meanwhile. A stream silent for `silenceTimeout` is stopped (and so replaced).
    private func opened(_ generation: Int, streamID: String?, stop: @escaping @Sendable () -> Void) -> Bool {
        guard generation == live.generation else { return false }
        live.lastActivity = .now
        live.streamID = streamID
        live.authRetried = false
        if let token = live.streamToken, let expires = TokenSource.expiry(of: token) {
            refreshToken(of: generation, before: expires)
        }
        if live.reconcileAgain {
            live.reconcileAgain = false
            demandChanged()
        }
        if live.awaitingSnapshot.isEmpty {
            // Every watch resumes: no frame comes until something changes.
            live.failures = 0
            connection = .live
        }
        Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                guard let self, generation == self.live.generation else { return stop() }
                if ContinuousClock.now - self.live.lastActivity > self.silenceTimeout { return stop() }
            }
        }
        return true
    }

    func apply(_ item: StreamItem) {
        live.lastActivity = .now
        switch item {
        case .activity(let bytes): live.bytesReceived += bytes
        case .retry(let milliseconds): live.retry = .milliseconds(max(100, milliseconds))
        case .expired:
            // Not a failure: a new stream, with a new token, resumes after the last frame at once.
            let token = live.streamToken
            live.generation += 1
            dropStream(cancelling: true)
            Task {
                if let token { await tokens?.refused(token) }
                reconcile()
            }
        case .frame(let seq, let entries):
            for entry in entries {
                apply(entry.watch, entry.event, entry.data)
                // A watch's first entry (its snapshot, or its delete) makes it one to resume.
                if entry.event != "change", live.awaitingSnapshot.remove(entry.watch) != nil {
                    live.established.insert(entry.watch)
                }
            }
            live.framesApplied += 1
            if let seq { live.lastSeq = seq }
            live.failures = 0
            if connection != .live { connection = .live }
        }
    }

    private func apply(_ watch: String, _ event: String, _ data: JSONValue) {
        guard let target = live.watches[watch] else { return }
        if event == "revoked" { return revoke(watch, target) }
        let deleted = event == "delete"
        if deleted { live.ended.insert(watch) }
        switch target {
        case .book(let id):
            guard let book = books[id]?.value else { return }
            if deleted { return book.storage.markDeleted() }
            book.storage.applyFromStream(data.members ?? [:], snapshot: event == "snapshot")
        case .library(let id):
            guard let library = libraryModels[id]?.value else { return }
            if deleted {
                library.storage.markDeleted()
                return library.membership.replace(with: [])
            }
            library.storage.applyFromStream(data.members ?? [:], snapshot: event == "snapshot")
            applyMembership(data["books"], to: library.membership, model: bookModel)
        case .books(let key):
            guard let collection = collections[key]?.value else { return }
            applyMembership(event == "snapshot" ? data["items"] : data, to: collection.membership, model: bookModel)
        case .libraries:
            guard let list = libraryList?.value else { return }
            applyMembership(event == "snapshot" ? data["items"] : data, to: list.membership, model: libraryModel)
        }
    }

    /// The stream's new token no longer reads `watch`, which the server ended: a book or library
    /// is gone for this user, as if deleted; a collection is asked for again, to be sent as the
    /// new rights show it.
    private func revoke(_ watch: String, _ target: WatchTarget) {
        switch target {
        case .book(let id):
            live.ended.insert(watch)
            books[id]?.value?.storage.markDeleted()
        case .library(let id):
            live.ended.insert(watch)
            libraryModels[id]?.value?.storage.markDeleted()
            libraryModels[id]?.value?.membership.replace(with: [])
        case .books, .libraries:
            live.watches[watch] = nil
            live.established.remove(watch)
            live.awaitingSnapshot.remove(watch)
            demandChanged()
        }
    }

    /// Hands the open stream a new token from the provider `tokenRefreshLead` before `expires`
    /// (at most a third of the token's life before), so that the stream does not end; then the
    /// same for the new token. If the stream is gone or refuses it, nothing: the stream ends at
    /// its expiry and the next one starts with a new token.
    private func refreshToken(of generation: Int, before expires: Date) {
        live.refreshTask?.cancel()
        live.refreshTask = nil
        let life = expires.timeIntervalSinceNow
        let lead = min(tokenRefreshLead.timeInterval, life / 3)
        guard tokenRefreshLead > .zero, life > 0, let tokens else { return }
        live.refreshTask = Task { [weak self] in
            try? await Task.sleep(for: .seconds(life - lead))
            guard !Task.isCancelled, let self, generation == self.live.generation,
                let streamID = self.live.streamID
            else { return }
            guard let fresh = try? await tokens.fresh(), let next = TokenSource.expiry(of: fresh) else { return }
            let answer = try? await self.attempt(
                .POST, "/events/" + streamID, json: .object([]), contentType: "application/json", headers: [],
                token: fresh)
            guard generation == self.live.generation, answer?.status == 204 else { return }
            self.live.streamToken = fresh
            self.live.tokensRefreshed += 1
            self.refreshToken(of: generation, before: next)
        }
    }

    /// A snapshot's array of members, or a change's `added` and `removed`.
    private func applyMembership<Member>(
        _ data: JSONValue?, to membership: Membership<Member>, model: (UUID) -> Member
    ) {
        guard let data else { return }
        switch data {
        case .array(let items):
            membership.replace(
                with: items.compactMap { $0["id"]?.string.flatMap(UUID.init(uuidString:)) }.map(model))
        case .object:
            let added = (data["added"]?.array ?? []).compactMap { $0["id"]?.string.flatMap(UUID.init(uuidString:)) }
            let removed = (data["removed"]?.array ?? []).compactMap { $0.string.flatMap(UUID.init(uuidString:)) }
            membership.apply(added: added.map(model), removed: Set(removed))
        default: break
        }
    }

    /// Moves the open stream to `desired` through its side channel (`POST /events/{streamId}`):
    /// no new connection, no resume of the kept watches; added ones get their snapshot in a later
    /// frame. If the server does not know the stream (it ended, or another replica holds it behind
    /// a load balancer), a new stream is opened instead.
    private func change(_ streamID: String, to desired: [String: WatchTarget]) {
        let current = Set(live.watches.keys)
        let added = desired.keys.filter { !current.contains($0) }.sorted()
        let removed = current.subtracting(desired.keys).sorted()
        let generation = live.generation
        for watch in added {
            live.watches[watch] = desired[watch]
            live.awaitingSnapshot.insert(watch)
        }
        for watch in removed {
            live.watches[watch] = nil
            live.established.remove(watch)
            live.awaitingSnapshot.remove(watch)
            live.ended.remove(watch)
        }
        live.changing = true
        live.watchChanges += 1
        let body = JSONValue(object: [
            "add": .array(added.map(JSONValue.string)), "remove": .array(removed.map(JSONValue.string)),
        ])
        Task { [weak self] in
            let answer = try? await self?.send(.POST, "/events/" + streamID, json: body, read: true)
            guard let self, generation == self.live.generation else { return }
            self.live.changing = false
            guard answer?.status == 204 else {
                // The stream is unknown here or the change was refused: a new stream carries the
                // demand (kept watches resume there, new ones get their snapshot).
                return self.open(self.desiredWatches())
            }
            if self.live.reconcileAgain {
                self.live.reconcileAgain = false
                self.reconcile()
            }
        }
    }

    /// The server refused the stream: a watch of a resource that is gone (404) marks its model
    /// deleted and the stream opens again without it at once; anything else backs off.
    func refused(_ generation: Int, _ answer: Answer) {
        if answer.status == 401, tokens != nil, !live.authRetried, generation == live.generation {
            // The token was refused (revoked, keys rotated): once, at once, with a new one.
            live.authRetried = true
            dropStream()
            return reconcile()
        }
        if answer.status == 404, let watch = Self.watchNamed(in: answer.error.detail),
            let target = live.watches[watch]
        {
            switch target {
            case .book(let id): books[id]?.value?.storage.markDeleted()
            case .library(let id): libraryModels[id]?.value?.storage.markDeleted()
            case .books, .libraries: break
            }
            dropStream()
            return reconcile()
        }
        var delay: Duration?
        if case .unavailable(let retryAfter, _) = answer.error { delay = retryAfter }
        failed(generation, "HTTP \(answer.status): \(answer.error.detail)", after: delay)
    }

    /// Forgets the stream (its task, after cancelling it when asked, its id and the watches it
    /// carried): the next `reconcile` opens another with every watch still demanded.
    private func dropStream(cancelling: Bool = false) {
        if cancelling { live.streamTask?.cancel() }
        live.streamTask = nil
        live.watches = [:]
        live.streamID = nil
    }

    /// `watch "<watch>": …`, as the server names a watch it refuses.
    private static func watchNamed(in detail: String) -> String? {
        guard detail.hasPrefix("watch \""), let end = detail.range(of: "\": ") else { return nil }
        return String(detail[detail.index(detail.startIndex, offsetBy: 7)..<end.lowerBound])
    }

    /// The stream is gone: the next attempt after the backoff, with jitter.
    func failed(_ generation: Int, _ reason: String, after serverDelay: Duration? = nil) {
        guard generation == live.generation, !live.closed else { return }
        live.generation += 1
        dropStream()
        live.failures += 1
        let exponent = min(live.failures - 1, 10)
        let ceiling = min(maximumBackoff, live.retry * (1 << exponent))
        // Equal jitter: at least half the step, so a crowd of clients spreads out but none hurries.
        let delay = serverDelay ?? (ceiling / 2 + ceiling / 2 * Double.random(in: 0...1))
        let attempt = live.generation
        connection = .offline(nextAttempt: Date() + delay.timeInterval, reason: reason)
        live.backingOff = true
        live.streamTask = Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard let self, attempt == self.live.generation, !self.live.closed else { return }
            self.live.streamTask = nil
            self.live.backingOff = false
            self.reconcile()
        }
        lifetime.hold(live.streamTask)
    }

    // MARK: For tests and tools

    /// Waits until the stream carries every demanded watch and has delivered their snapshots
    /// (or `timeout` passes); returns whether it got there.
    @discardableResult
    public func settled(timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !live.reconcileScheduled, connection == .live || desiredWatches().isEmpty,
                live.awaitingSnapshot.isEmpty, Set(desiredWatches().keys).isSubset(of: live.watches.keys)
            {
                return true
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    /// The watches of the stream open now (for tests, tools and the curious).
    public var openWatches: [String] { live.watches.keys.sorted() }

    /// How many streams this client has opened so far.
    public var streamsOpened: Int { live.streamsOpened }

    /// How many times this client changed the watches of its open stream without reconnecting.
    public var watchChanges: Int { live.watchChanges }

    /// Bytes of event-stream bodies this client has received (all its streams).
    public var streamBytesReceived: Int { live.bytesReceived }

    /// Frames of its streams this client has applied.
    public var framesApplied: Int { live.framesApplied }

    /// How many times this client handed its open stream a new token before the old one expired.
    public var tokensRefreshed: Int { live.tokensRefreshed }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
