import LibraryDomain

/// Windows of book lists (`.window`): the first rows of a sorted or searched list, kept by a
/// `LiveWindow` for each set of readable libraries among its subscribers. A window's subscriber
/// gets its rows as a snapshot, then `added`, `removed` and `changed` as rows enter, leave or
/// change, each change at most one event, and reads nothing for a change that cannot enter or
/// leave it.
extension LiveHub {
    func subscribe(_ waiter: Waiter, toWindow window: BookWindow) {
        let request = waiter.request
        let key = LiveWindow.Key(window: window, readable: request.readable)
        if windows[key] == nil && windows.count >= maxWindows {
            return waiter.outcome(
                .failed(
                    StoreError(
                        .atCapacity(
                            "The server has \(maxWindows) windows of lists open, as many as it keeps; retry shortly."
                        ))))
        }
        let subscriber = join(waiter)
        // Until its snapshot is sent, the changes of the window are held (those it includes
        // dropped), as for a collection's.
        subscriber.holdForSnapshot()
        if let live = windows[key] {
            if live.loaded && !live.isReading {
                sendSnapshot(of: live, to: subscriber)
            } else {
                live.joiners.append(subscriber)
            }
            return
        }
        let live = LiveWindow(key)
        live.audience = audiences[request.target]
        live.joiners.append(subscriber)
        windows[key] = live
        let groupKey = WindowGroup.Key(query: window.query, readable: request.readable)
        let group = windowGroups[groupKey] ?? WindowGroup(groupKey)
        if windowGroups[groupKey] == nil {
            windowGroups[groupKey] = group
            windowGroupsByFilter[window.query.filter, default: [:]][ObjectIdentifier(group)] = group
        }
        group.add(live)
        counters.windows.add(1, ordering: .relaxed)
        updateInbox()  // before the read, so that no commit it misses skips the window
        read(live)
    }

    /// Reads the rows of `live`.
    private func read(_ live: LiveWindow) {
        live.beginRead()
        counters.windowReads.add(1, ordering: .relaxed)
        store.read(live.window, among: live.key.readable) { result in
            LiveActor.enqueue { self.windowRead(live, result) }
        }
    }

    private func windowRead(_ live: LiveWindow, _ result: Result<CollectionPage, StoreError>) {
        guard windows[live.key] === live else { return }  // closed meanwhile
        guard case .success(let page) = result, case .books(let books) = page.items else {
            // Its subscribers' streams end, and their clients reconnect and start over.
            close(live)
            for subscriber in subscribers(of: live) + live.joiners { subscriber.finish() }
            return
        }
        let wasLoaded = live.loaded
        guard live.endRead(books, readSeq: page.seq) else { return read(live) }
        let told = live.takeTold()
        if wasLoaded, let delta = live.delta(from: told) { deliver(delta, of: live) }
        let joiners = live.joiners
        live.joiners = []
        for subscriber in joiners { sendSnapshot(of: live, to: subscriber) }
    }

    /// Sends `subscriber` the rows of `live` as one snapshot page, then what was held meanwhile.
    private func sendSnapshot(of live: LiveWindow, to subscriber: Subscriber) {
        guard !subscriber.removed, !subscriber.finished else { return }
        let seq = max(appliedSeq, live.seq)
        subscriber.setFloor(seq)
        let page = CollectionPage(seq: seq, items: .books(live.rows.map(\.book)), isLast: true)
        subscriber.sink.sendPage(Self.event(of: page, first: true, shape: subscriber.request.shape)) {
            guard !subscriber.removed else { return }
            subscriber.release(after: [])
            subscriber.sink.settled(through: seq)
        }
    }

    /// Applies a committed change to the windows it can concern: their lists are found by lookup
    /// as collection streams are (the filters its book matched before or after it), and each list
    /// tells which of its windows the change may enter or leave (`WindowGroup`).
    func publishToWindows(_ change: CommittedChange) {
        var seen: Set<ObjectIdentifier> = []
        for case .book(let book, _, let before, let deleted) in change.items {
            for keys in [before, deleted ? nil : book.keys] {
                guard let keys else { continue }
                for filter in BookFilter.all(matching: keys) {
                    guard let found = windowGroupsByFilter[filter] else { continue }
                    for (id, group) in found where seen.insert(id).inserted {
                        counters.applyWork.add(1, ordering: .relaxed)
                        for live in group.windows(concernedBy: change) { apply(change, to: live) }
                    }
                }
            }
        }
    }

    private func apply(_ change: CommittedChange, to live: LiveWindow) {
        counters.applyWork.add(1, ordering: .relaxed)
        if live.isReading { return live.keep(change) }
        // Its rows include every change through `seq` already: the read that made them saw them
        // (a replica's read can be ahead of the changes handed to the live side).
        guard change.seq > live.seq else { return }
        switch live.apply(change) {
        case .untouched: break
        case .changed(let delta): deliver(delta, of: live)
        case .needsRead: read(live)
        }
    }

    private func deliver(_ delta: ResourceDelta, of live: LiveWindow) {
        guard let audience = live.audience else { return }
        let readable = live.readable
        let delivered = audience.deliver(seq: live.seq) { $0 == readable ? delta : nil }
        counters.applyWork.add(delivered, ordering: .relaxed)
    }

    private func subscribers(of live: LiveWindow) -> [Subscriber] {
        guard let audience = live.audience else { return [] }
        return audience.groups.filter { $0.key.readable == live.readable }.flatMap(\.value.values)
    }

    /// Closes the windows of `window` but those for the readable libraries `kept`: nobody
    /// subscribes to them any more.
    func closeWindows(of window: BookWindow, keeping kept: Set<Set<String>?>) {
        let open = windowGroupsByFilter[window.query.filter].map { $0.values.flatMap(\.windows) } ?? []
        for live in open where live.window == window && !kept.contains(live.readable) {
            close(live)
        }
    }

    private func close(_ live: LiveWindow) {
        guard windows[live.key] === live else { return }
        windows[live.key] = nil
        counters.windows.subtract(1, ordering: .relaxed)
        guard let group = live.group else { return }
        group.remove(live)
        guard group.isEmpty else { return }
        windowGroups[group.key] = nil
        let filter = group.key.query.filter
        windowGroupsByFilter[filter]?[ObjectIdentifier(group)] = nil
        if windowGroupsByFilter[filter]?.isEmpty == true { windowGroupsByFilter[filter] = nil }
    }
}
