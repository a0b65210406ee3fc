import APICore
import HTTPServer
import LiveEngine

/// A subscriber's events, encoded as Server-Sent Events onto its HTTP stream.
///
/// An event larger than `chunkSize` (a big library's snapshot) is written a chunk at a time, the
/// next once the connection has sent the last: a stalled reader holds the one encoding, shared with
/// every subscriber who got the same snapshot, and at most a chunk of output, never a copy of it all.
/// While it is written the socket gets a large send buffer, then the small one again.
@LiveActor
final class EventStreamSink: LiveEventSink, StreamDeadlines.Expiring {
    let stream: HTTPStream
    let counters: LiveCounters
    /// What waits to be written, in order: bytes, or a large event being encoded off the live
    /// actor, whose place is kept (what is sent meanwhile waits behind it).
    private var queue: [Pending] = []
    private enum Pending {
        case bytes(ArraySlice<UInt8>)
        case encoding(Int)
    }
    private var readyCallbacks: [@Sendable () -> Void] = []
    private var finishing = false
    /// A collection snapshot's pages are being written: no other event can go between them.
    private var paging = false
    /// Its credential expired: nothing more is written.
    private var expired = false
    /// The token of the next large event encoded off the live actor.
    private var nextToken = 0
    /// Whether a chunk was written and the connection has not sent it yet.
    private var pumping = false

    /// Events may queue up to this many writes deep before further changes are coalesced: one
    /// bound for a single stream and for a multiplexed stream's frames (`Multiplexer.flush`).
    static let maxBacklog = 32
    static let chunkSize = 256 * 1024
    /// The socket send buffer while a large event is written (`HTTPStream.setSendBuffer`), and after.
    static let largeSendBuffer = 1 << 20
    static let sendBuffer = HTTPServerConfiguration().streamSendBuffer

    init(stream: HTTPStream, counters: LiveCounters) {
        self.stream = stream
        self.counters = counters
    }

    var isReady: Bool { queue.isEmpty && stream.backlog < Self.maxBacklog }

    /// Events with more members than this (a big snapshot, a big catch-up) are encoded off the
    /// live actor. Low in debug builds, so that the tests' snapshots and catch-ups take that path.
    #if DEBUG
        static let encodeElsewhereMembers = 64
    #else
        static let encodeElsewhereMembers = 2_000
    #endif

    func send(_ event: LiveEvent) {
        guard !expired else { return }
        counters.events.add(1, ordering: .relaxed)
        if event.memberCount > Self.encodeElsewhereMembers {
            let token = nextToken
            nextToken += 1
            queue.append(.encoding(token))
            stream.setSendBuffer(Self.largeSendBuffer)
            event.wire.encodeElsewhere({ EventEncoding.pieces(event) }) { [self] pieces in
                if let place = queue.firstIndex(where: { if case .encoding(token) = $0 { true } else { false } }) {
                    queue.replaceSubrange(place...place, with: pieces.map { .bytes($0[...]) })
                }
                pump()
            }
            return
        }
        write(event.wire.bytes { EventEncoding.encode(event) })
    }

    private func write(_ bytes: [UInt8]) {
        if queue.isEmpty && bytes.count <= Self.chunkSize {
            stream.write(bytes)
        } else {
            if queue.isEmpty { stream.setSendBuffer(Self.largeSendBuffer) }
            queue.append(.bytes(bytes[...]))
            pump()
        }
    }

    /// Writes the next chunk of what waits, then waits for the connection to send it: one chunk
    /// at a time, and none while the next in line is still being encoded.
    private func pump() {
        guard !pumping else { return }
        guard let first = queue.first else {
            stream.setSendBuffer(Self.sendBuffer)
            readyCallbacks.forEach { $0() }
            readyCallbacks = []
            if finishing { stream.finish() }
            return
        }
        guard case .bytes(var next) = first else { return }  // its encoding calls again
        let chunk = next.prefix(Self.chunkSize)
        next = next.dropFirst(chunk.count)
        if next.isEmpty { queue.removeFirst() } else { queue[0] = .bytes(next) }
        stream.write(Array(chunk))
        pumping = true
        stream.whenDrained { [weak self] in
            LiveActor.enqueue {
                self?.pumping = false
                self?.pump()
            }
        }
    }

    /// A collection snapshot's page. The next one is asked for while this one is still being
    /// sent (reading it overlaps the sending), but no more than one waits behind it; meanwhile the
    /// socket has the large send buffer, as for a large event.
    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) {
        guard !expired else { return }
        let isLast = event.page?.isLast == true
        if event.page?.isFirst == true { stream.setSendBuffer(Self.largeSendBuffer) }
        paging = !isLast
        if isLast { counters.events.add(1, ordering: .relaxed) }
        write(EventEncoding.page(event))
        if isLast {
            whenReady { [weak self] in
                LiveActor.enqueue {
                    self?.stream.setSendBuffer(Self.sendBuffer)
                    next()
                }
            }
        } else if queue.isEmpty && stream.backlog <= 1 {
            next()
        } else {
            whenReady { LiveActor.enqueue { next() } }
        }
    }

    func whenReady(_ callback: @escaping @Sendable () -> Void) {
        if queue.isEmpty { stream.whenDrained(callback) } else { readyCallbacks.append(callback) }
    }

    func keepAlive() {
        if !expired, queue.isEmpty { stream.write(EventEncoding.keepAlive) }
    }

    /// The stream's credential has expired: an `expired` event, then the end. (In the middle of
    /// a collection snapshot's pages the stream just ends: the client drops the unfinished event
    /// and learns of the expiry when it reconnects.)
    func expire() {
        guard !expired else { return }
        expired = true
        counters.expiredStreams.add(1, ordering: .relaxed)
        if !paging { write(EventEncoding.expired) }
        finish()
    }

    func finish() {
        if queue.isEmpty { stream.finish() } else { finishing = true }
    }
}
