import Dispatch
import Glibc
import LibraryDomain
import PostgreSQL
import Synchronization

/// Why a replica's change feed cannot go on from what it applied.
package enum FeedGap: Sendable, Equatable {
    /// The log no longer holds changes after `applied`: the replica was cut off from the database
    /// for longer than the history lasts; the oldest change kept is `oldest`.
    case pruned(applied: Int, oldest: Int)
    /// The database's newest change is older than one the replica applied: its changes after
    /// `latest` were lost (a failover without synchronous replication, or a restore).
    case rewound(applied: Int, latest: Int)
}

/// How many changes a replica's feed handed to its live engine, by where it found them.
package struct FeedCounts: Sendable, Equatable {
    /// This replica's own commits, handed over by its writer.
    package var writer = 0
    /// Rows a notification carried.
    package var notification = 0
    /// Read from the change log.
    package var log = 0

    package init(writer: Int = 0, notification: Int = 0, log: Int = 0) {
        (self.writer, self.notification, self.log) = (writer, notification, log)
    }
}

/// How a replica hears its own commits (other replicas' come by notification, or from the log).
package enum OwnCommits: Sendable {
    /// Handed over by its writer when they are next in order (the default).
    case handedOver
    /// As the other replicas' are: carried by their notification (tests).
    case notified
    /// Read from the log, as every other change is: notifications' rows are not used (tests).
    case readFromLog
}

/// How a replica learns of every commit, its own and the other replicas', and hands them to the
/// live engine one at a time in id order.
///
/// A listener thread keeps a connection that `LISTEN`s on the schema's channel. A notification
/// carries the batch's last change id and, when they fit, its log rows (`FeedPayload`): a replica
/// applies those that come next in order at once, with no query. When a notification carries only
/// an id, or its rows do not follow what was applied, the listener reads the log after the last id
/// applied, in order, so no payload limit applies and a lost notification costs nothing; it also
/// reads the log once a second, and after every reconnection. The replica's own commits are handed
/// over at once by its writer when they are next in order; otherwise they wait until the changes
/// before them come (a notification, or the log).
final class ChangeFeed: Sendable {
    private struct State {
        /// The id of the last change handed to the observer.
        var applied: Int
        var observer: (@Sendable (CommittedChange) -> Void)?
        var stopping = false
        /// The writer's own commits not yet handed over: a change before them has not come yet.
        var own: [CommittedChange] = []
        /// How many changes were handed over from each source.
        var counts = FeedCounts()

        /// Hands over `changes` that come next, in order, skipping those already applied; false
        /// when one does not follow what was applied (a change before it has not come).
        mutating func take(_ changes: some Collection<CommittedChange>, from source: WritableKeyPath<FeedCounts, Int>)
            -> Bool
        {
            guard let observer else { return false }
            for change in changes where change.seq > applied {
                guard change.seq == applied + 1 else { return false }
                observer(change)
                applied = change.seq
                counts[keyPath: source] += 1
            }
            return true
        }

        /// Hands over the writer's commits that now come next; true when none is left waiting.
        mutating func takeOwn() -> Bool {
            own.removeAll { $0.seq <= applied }
            guard let first = own.first, first.seq == applied + 1, take(own, from: \.writer) else { return own.isEmpty }
            own.removeAll()
            return true
        }
    }

    private let address: PGAddress
    private let channel: String
    private let state: Mutex<State>
    /// Wakes the listener from `poll`: `Wake.read` means "read the log", `Wake.own` "the writer's
    /// commits wait for earlier ones".
    private let wake: (read: Int32, write: Int32)
    private let stopped = DispatchSemaphore(value: 0)
    /// Told when the log no longer continues what this replica applied: its live state cannot be
    /// repaired.
    private let onGap: @Sendable (FeedGap) -> Void
    private let ownCommits: OwnCommits
    /// This replica's token in its notifications (`FeedPayload`), by which it knows its own.
    let origin = String(UInt64.random(in: 1...UInt64.max), radix: 36)

    private enum Wake: UInt8 {
        case read = 1
        case own = 2
    }

    init(
        address: PGAddress, channel: String, applied: Int, ownCommits: OwnCommits,
        onGap: @escaping @Sendable (FeedGap) -> Void
    ) {
        self.address = address
        self.ownCommits = ownCommits
        self.channel = channel
        self.onGap = onGap
        state = Mutex(State(applied: applied))
        var fds: [Int32] = [0, 0]
        pipe(&fds)
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wake = (fds[0], fds[1])
        DispatchQueue(label: "postgres.listener").async { [self] in
            listen()
            stopped.signal()
        }
    }

    /// The shortest time between two reads of the log: what a change heard of waits at most before
    /// it is read with those that follow it.
    static let readInterval = Duration.milliseconds(2)

    /// The id of the last change handed over (or to be handed first: `applied + 1` is next).
    var applied: Int { state.withLock { $0.applied } }

    /// How many changes were handed over from each source so far.
    var counts: FeedCounts { state.withLock { $0.counts } }

    func observe(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        state.withLock { $0.observer = observer }
        poke(.read)
    }

    /// The writer's own commits, in id order: handed over now if they come next, else once the
    /// changes before them have come (another replica's notification, or the log).
    func committed(_ changes: [CommittedChange]) {
        switch ownCommits {
        case .notified: return
        case .readFromLog: return poke(.read)
        case .handedOver: break
        }
        let waiting = state.withLock { state -> Bool in
            // Kept only while few: a listener that stays behind reads them from the log anyway.
            if state.own.count < 4_096 { state.own += changes }
            return !state.takeOwn()
        }
        if waiting { poke(.own) }
    }

    func close() {
        var byte: UInt8 = 1
        state.withLock { $0.stopping = true }
        _ = Glibc.write(wake.write, &byte, 1)
        stopped.wait()
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    private func poke(_ reason: Wake) {
        // Under the lock, and never after `close` began: then the descriptor may belong to
        // something else.
        state.withLock { state in
            guard !state.stopping else { return }
            var byte = reason.rawValue
            _ = Glibc.write(wake.write, &byte, 1)
        }
    }

    /// Takes what `notifications` carry; false when one announced a change it does not carry
    /// next in order (the log must be read).
    private func take(_ notifications: [(channel: String, payload: String)]) -> Bool {
        var complete = true
        for (_, payload) in notifications {
            guard let last = FeedPayload.last(payload) else {
                complete = false
                continue
            }
            guard last > applied else { continue }  // read already
            // This replica's own: its writer hands them over (`committed`).
            if ownCommits == .handedOver, FeedPayload.origin(payload) == origin { continue }
            guard ownCommits != .readFromLog, let changes = FeedPayload.changes(payload) else {
                complete = false
                continue
            }
            if !state.withLock({ $0.take(changes, from: \.notification) }) { complete = false }
        }
        return complete
    }

    /// Hands over the writer's commits that now come next; true when some still wait for changes
    /// not yet come.
    private func ownStillWaiting() -> Bool { state.withLock { !$0.takeOwn() } }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func listen() {
        var backoff = 0
        while !stopping {
            // Every reconnection waits, longer each time until one catches up (a failing read
            // must not turn into a loop of new connections).
            if backoff > 0 { pause(milliseconds: backoff) }
            backoff = min(max(backoff * 2, 50), 1_000)
            let connection: PGConnection
            do {
                connection = try address.connect()
                try connection.executeScript("LISTEN \"\(channel)\"")
                // Whatever was committed while this replica was not listening.
                try catchUp(connection)
                backoff = 0
            } catch {
                continue
            }
            var lastRead = ContinuousClock.now
            while !stopping {
                var fds = [
                    pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, 1_000)
                if ready < 0, errno != EINTR { break }
                // A second without anything: read the log anyway (a lost notification costs that).
                var mustRead = ready == 0
                if fds[1].revents != 0, drain().contains(.read) { mustRead = true }
                guard connection.consumeInput() else { break }
                if !take(connection.notifications()) { mustRead = true }
                if stopping { return }
                guard mustRead || ownStillWaiting() else { continue }
                // Reads at most one per `readInterval`: under many small commits (replicas taking
                // turns at the lock commit a few writes each), one read then carries the changes
                // of several notifications instead of one query each. Notifications that came
                // meanwhile may make the read needless.
                let since = ContinuousClock.now - lastRead
                if since < Self.readInterval {
                    let woken = pause(milliseconds: Int((Self.readInterval - since) / .microseconds(1_000)) + 1)
                    if woken.contains(.read) { mustRead = true }
                    guard connection.consumeInput() else { break }
                    if !take(connection.notifications()) { mustRead = true }
                    guard mustRead || ownStillWaiting() else { continue }
                }
                lastRead = ContinuousClock.now
                guard (try? catchUp(connection)) != nil, connection.isOpen else { break }
            }
        }
    }

    /// Reads the log after the last applied change and hands over what it finds, in order: one
    /// query per 1,000 changes; two more only when it finds none (then it checks that the log
    /// still continues what was applied).
    private func catchUp(_ connection: PGConnection) throws {
        let reader = SQLReader(session: .postgres(connection))
        let most = 1_000
        while true {
            let after = applied
            guard state.withLock({ $0.observer }) != nil else { return }
            let changes = try reader.changes(where: "TRUE", [], after: after, through: after + most)
            guard !changes.isEmpty else {
                let latest = try reader.latestSeq()
                if latest < after {
                    // Changes this replica applied (and streamed) are not in the database any
                    // more: a failover to a standby that had not received them, or a restore.
                    // Their ids will be given to other changes.
                    onGap(.rewound(applied: after, latest: latest))
                } else if latest > after {
                    // Ids with no row: the log was pruned past them.
                    let oldest = try reader.oldestKeptSeq()
                    if oldest > after + 1 { onGap(.pruned(applied: after, oldest: oldest)) }
                }
                return
            }
            let gap = state.withLock { state -> Int? in
                guard state.observer != nil else { return nil }
                defer { _ = state.takeOwn() }
                guard state.take(changes, from: \.log) else { return changes.first { $0.seq > state.applied }?.seq }
                return nil
            }
            if let gap {
                onGap(.pruned(applied: after, oldest: gap))
                return
            }
            // Ids are visible in order (each is taken under the lock after the one before it
            // committed), so a read that found fewer than it allowed found everything.
            guard changes.count == most else { return }
        }
    }

    /// Empties the wake pipe; returns why it was woken.
    @discardableResult
    private func drain() -> Set<Wake> {
        var reasons: Set<Wake> = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = read(wake.read, &buffer, buffer.count)
            guard count > 0 else { return reasons }
            for byte in buffer[..<count] { reasons.insert(Wake(rawValue: byte) ?? .read) }
        }
    }

    /// Waits `milliseconds`, or less when woken; returns why it was woken.
    @discardableResult
    private func pause(milliseconds: Int) -> Set<Wake> {
        var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, Int32(milliseconds))
        return drain()
    }
}
