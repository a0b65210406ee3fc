import HTTPServer
import LiveEngine

/// A subscriber's events, encoded as Server-Sent Events onto its HTTP stream.
///
/// An event larger than `chunkSize` (a big library's snapshot) is written a chunk at a time, the
/// next once the connection has sent the last: a stalled reader holds the one encoding, shared with
/// every subscriber who got the same snapshot, and at most a chunk of output, never a copy of it all.
/// While it is written the socket gets a large send buffer, then the small one again.
@LiveActor
final class EventStreamSink: LiveEventSink {
    let stream: HTTPStream
    let counters: LiveCounters
    /// Bytes waiting behind a large event, in order.
    private var queue: [ArraySlice<UInt8>] = []
    private var readyCallbacks: [@Sendable () -> Void] = []
    private var finishing = false
    /// Whether a large event is being encoded off the live actor; what is sent meanwhile waits.
    private var encoding = false

    /// Events may queue up to this many writes deep before further changes are coalesced.
    static let maxBacklog = 32
    static let chunkSize = 256 * 1024
    /// The socket send buffer while a large event is written (`HTTPStream.setSendBuffer`), and after.
    static let largeSendBuffer = 1 << 20
    static let sendBuffer = HTTPServerConfiguration().streamSendBuffer

    init(stream: HTTPStream, counters: LiveCounters) {
        self.stream = stream
        self.counters = counters
    }

    var isReady: Bool { !encoding && queue.isEmpty && stream.backlog < Self.maxBacklog }

    /// Snapshots with more members than this are encoded off the live actor.
    static let encodeElsewhereMembers = 2_000

    func send(_ event: LiveEvent) {
        counters.events.add(1, ordering: .relaxed)
        if (event.members?.count ?? 0) > Self.encodeElsewhereMembers {
            encoding = true
            event.wire.encodeElsewhere({ EventEncoding.encode(event) }) { [self] bytes in
                encoding = false
                queue.insert(bytes[...], at: 0)
                stream.setSendBuffer(Self.largeSendBuffer)
                pump()
            }
            return
        }
        write(event.wire.bytes { EventEncoding.encode(event) })
    }

    private func write(_ bytes: [UInt8]) {
        if !encoding && queue.isEmpty && bytes.count <= Self.chunkSize {
            stream.write(bytes)
        } else {
            queue.append(bytes[...])
            if queue.count == 1 && !encoding {
                stream.setSendBuffer(Self.largeSendBuffer)
                pump()
            }
        }
    }

    /// Writes the next chunk of what waits, then waits for the connection to send it.
    private func pump() {
        guard var next = queue.first else {
            stream.setSendBuffer(Self.sendBuffer)
            readyCallbacks.forEach { $0() }
            readyCallbacks = []
            if finishing { stream.finish() }
            return
        }
        let chunk = next.prefix(Self.chunkSize)
        next = next.dropFirst(chunk.count)
        if next.isEmpty { queue.removeFirst() } else { queue[0] = next }
        stream.write(Array(chunk))
        stream.whenDrained { [weak self] in
            LiveActor.enqueue { self?.pump() }
        }
    }

    /// A collection snapshot's page. The next one is asked for while this one is still being
    /// sent (reading it overlaps the sending), but no more than one waits behind it; meanwhile the
    /// socket has the large send buffer, as for a large event.
    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) {
        let isLast = event.page?.isLast == true
        if event.page?.isFirst == true { stream.setSendBuffer(Self.largeSendBuffer) }
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
        if queue.isEmpty && !encoding { stream.whenDrained(callback) } else { readyCallbacks.append(callback) }
    }

    func keepAlive() {
        if queue.isEmpty && !encoding { stream.write(EventEncoding.keepAlive) }
    }

    func finish() {
        if queue.isEmpty && !encoding { stream.finish() } else { finishing = true }
    }
}
