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

/// How a replica learns of every commit, its own and the other replicas', and hands them to the
/// live engine one at a time in id order.
///
/// A listener thread keeps a connection that `LISTEN`s on the schema's channel. A notification
/// carries only a change id; what changed is read from the change log, after the last id applied,
/// in order, so no payload limit applies and a lost notification costs nothing: the listener also
/// reads the log once a second, and after every reconnection. The replica's own commits are
/// handed over at once by its writer when they are next in order (no read needed); otherwise the
/// listener is woken to read the log up to them.
final class ChangeFeed: Sendable {
    private struct State {
        /// The id of the last change handed to the observer.
        var applied: Int
        var observer: (@Sendable (CommittedChange) -> Void)?
        var stopping = false
    }

    private let address: PGAddress
    private let channel: String
    private let state: Mutex<State>
    /// Wakes the listener from `poll`: one byte means "read the log", closing means "stop".
    private let wake: (read: Int32, write: Int32)
    private let stopped = DispatchSemaphore(value: 0)
    /// Told when the log no longer continues what this replica applied: its live state cannot be
    /// repaired.
    private let onGap: @Sendable (FeedGap) -> Void
    /// Whether the replica's own commits, too, are read from the log rather than handed over by
    /// its writer (tests: every change then takes the path other replicas' changes take).
    private let readsOwnCommits: Bool

    init(
        address: PGAddress, channel: String, applied: Int, readsOwnCommits: Bool,
        onGap: @escaping @Sendable (FeedGap) -> Void
    ) {
        self.address = address
        self.readsOwnCommits = readsOwnCommits
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

    func observe(_ observer: @escaping @Sendable (CommittedChange) -> Void) {
        state.withLock { $0.observer = observer }
        poke()
    }

    /// The writer's own commits, in id order: handed over now if they come next, else read from
    /// the log by the listener once the changes before them are.
    func committed(_ changes: [CommittedChange]) {
        let handed = state.withLock { state -> Bool in
            if readsOwnCommits { return false }
            guard let observer = state.observer, let first = changes.first, first.seq == state.applied + 1 else {
                return false
            }
            for change in changes { observer(change) }
            state.applied = changes.last!.seq
            return true
        }
        if !handed { poke() }
    }

    func close() {
        var byte: UInt8 = 1
        state.withLock { $0.stopping = true }
        _ = Glibc.write(wake.write, &byte, 1)
        stopped.wait()
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    private func poke() {
        // Under the lock, and never after `close` began: then the descriptor may belong to
        // something else.
        state.withLock { state in
            guard !state.stopping else { return }
            var byte: UInt8 = 1
            _ = Glibc.write(wake.write, &byte, 1)
        }
    }

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
                if fds[1].revents != 0 { drain() }
                if fds[0].revents != 0 {
                    guard connection.consumeInput() else { break }
                    _ = connection.notifications()
                }
                if stopping { return }
                // Reads at most one per `readInterval`: under many small commits (replicas taking
                // turns at the lock commit a few writes each), one read then carries the changes
                // of several notifications instead of one query each.
                let since = ContinuousClock.now - lastRead
                if since < Self.readInterval {
                    pause(milliseconds: Int((Self.readInterval - since) / .microseconds(1_000)) + 1)
                    guard connection.consumeInput() else { break }
                    _ = connection.notifications()
                }
                lastRead = ContinuousClock.now
                // On a notification, a poke, or a second without either: read what is new.
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
                guard let observer = state.observer else { return nil }
                for change in changes where change.seq > state.applied {
                    guard change.seq == state.applied + 1 else { return change.seq }
                    observer(change)
                    state.applied = change.seq
                }
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

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wake.read, &buffer, buffer.count) > 0 {}
    }

    private func pause(milliseconds: Int) {
        var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, Int32(milliseconds))
        drain()
    }
}
