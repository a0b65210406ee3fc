import LibraryDomain

/// Collection streams (`.libraries`, `.books(filter)`): nothing is materialized for them. A
/// subscriber joins its collection's audience at once, then gets a snapshot read page by page or
/// what it missed from the change log; live changes reach it through `publishToCollections`.
extension LiveHub {
    /// How many items a page of a collection's snapshot holds.
    static let snapshotPage = 1_000

    /// Subscribes to a collection. Nothing is loaded or kept: the subscriber joins the audience at
    /// once (so no change can slip between its snapshot and its first live event), then gets
    /// what it missed from the change log, or a snapshot read page by page.
    func subscribe(toCollection waiter: Waiter) {
        let request = waiter.request
        let subscriber = join(waiter)
        updateInbox()  // before any read, so that no commit the read misses skips the live side
        if let after = request.resumeAfter, after <= appliedSeq, after >= appliedSeq - store.history {
            resume(subscriber, after: after, stateSeq: appliedSeq, model: nil)
        } else {
            sendSnapshot(to: subscriber)
        }
    }

    /// Opens the stream of a collection's (or a window's) new subscriber and adds it to the
    /// audience of its target, made if it is the first.
    func join(_ waiter: Waiter) -> Subscriber {
        let request = waiter.request
        let subscriber = Subscriber(id: nextSubscriberID, request: request, sink: waiter.open(nextSubscriberID))
        nextSubscriberID += 1
        counters.subscribers.add(1, ordering: .relaxed)
        waiter.outcome(.subscribed)
        if audiences[request.target] == nil {
            audiences[request.target] = Audience()
            collectionAudiences += 1
        }
        audiences[request.target]!.add(subscriber)
        return subscriber
    }

    /// Sends a collection's snapshot a page at a time, at the pace the sink takes them. Live
    /// changes are held meanwhile: those the snapshot includes (up to its id, known with the first
    /// page) are dropped, the others folded and sent after the last page.
    func sendSnapshot(to subscriber: Subscriber) {
        guard !subscriber.removed, !subscriber.finished else { return }
        let request = subscriber.request
        let cursor = store.snapshot(of: request.target, pageSize: Self.snapshotPage, among: request.readable)
        // Weakly: the cursor keeps this handler, and the subscriber keeps the cursor.
        cursor.whenPreempted { [weak subscriber, weak cursor] in
            // Its client left a page untaken while other snapshots waited: the stream ends, and
            // the client reconnects and starts over, as after any snapshot that failed.
            LiveActor.enqueue {
                guard let subscriber, let cursor, subscriber.snapshot === cursor else { return }
                subscriber.finish()
            }
        }
        subscriber.holdForSnapshot()
        subscriber.snapshot = cursor
        sendPage(of: cursor, to: subscriber, first: true)
    }

    private func sendPage(of cursor: any CollectionSnapshot, to subscriber: Subscriber, first: Bool) {
        cursor.next { result in
            LiveActor.enqueue {
                guard subscriber.snapshot === cursor else { return }  // the stream ended
                switch result {
                case .failure:
                    // The stream ends; the client reconnects and starts over.
                    subscriber.finish()
                case .success(let page):
                    if first {
                        subscriber.setFloor(page.seq)
                        // Held changes that straddled the snapshot's id ended the stream.
                        guard subscriber.snapshot === cursor else { return }
                    }
                    let event = Self.event(of: page, first: first, shape: subscriber.request.shape)
                    subscriber.sink.sendPage(event) {
                        guard subscriber.snapshot === cursor else { return }
                        guard page.isLast else { return self.sendPage(of: cursor, to: subscriber, first: false) }
                        subscriber.closeSnapshot()
                        subscriber.release(after: [])
                        subscriber.sink.settled(through: page.seq)
                    }
                }
            }
        }
    }

    /// One page of a collection's snapshot as an event: its items with the requested fields.
    static func event(of page: CollectionPage, first: Bool, shape: SubscriptionRequest.Shape) -> LiveEvent {
        var event = LiveEvent(kind: .snapshot, seq: page.seq, id: "", isCollection: true)
        event.page = .init(isFirst: first, isLast: page.isLast)
        switch page.items {
        case .books(let books):
            let fields = BookField.allCases.filter { $0 != .id && shape.bookFields.contains($0) }
            var table = LiveEvent.MemberTable(.books(fields), capacity: books.count)
            table.append(books: books, id: \.id) { $0[$1] }
            event.members = table
        case .libraries(let libraries):
            let fields = LibraryField.allCases.filter { $0 != .id && shape.libraryFields.contains($0) }
            var table = LiveEvent.MemberTable(.libraries(fields), capacity: libraries.count)
            table.append(libraries: libraries, id: \.id) { $0[$1] }
            event.members = table
        }
        return event
    }

    /// Hands the collection streams a change can concern their events. Those are found by lookup,
    /// never by walking: a book is seen by the streams whose filter its values before or after
    /// the change match, 2^n filter keys each for n filterable fields (8 today: 16 lookups), whatever
    /// the collections' sizes.
    func publishToCollections(_ change: CommittedChange) {
        var targets: Set<LiveTarget> = []
        for item in change.items {
            switch item {
            case .library:
                if audiences[.libraries] != nil { targets.insert(.libraries) }
            case .book(let book, _, let before, let deleted):
                for keys in [before, deleted ? nil : book.keys] {
                    guard let keys else { continue }
                    for filter in BookFilter.all(matching: keys) where audiences[.books(filter)] != nil {
                        targets.insert(.books(filter))
                    }
                }
            }
        }
        for target in targets {
            guard let audience = audiences[target] else { continue }
            // One delta for each set of readable libraries among the audience's groups: most often
            // one, every library, kept without a dictionary.
            var everyLibrary: ResourceDelta??
            var restricted: [Set<String>: ResourceDelta?] = [:]
            let delivered = audience.deliver(seq: change.seq, firstSeq: change.firstSeq) { readable in
                guard let readable else {
                    if let made = everyLibrary { return made }
                    let made = ResourceDelta(change, for: target, readable: nil)
                    everyLibrary = .some(made)
                    return made
                }
                if let made = restricted[readable] { return made }
                let made = ResourceDelta(change, for: target, readable: readable)
                restricted[readable] = made
                return made
            }
            counters.applyWork.add(1 + delivered, ordering: .relaxed)
        }
    }
}
