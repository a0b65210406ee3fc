/// One event of a `text/event-stream`, as `EventSource` dispatches it.
public struct ServerSentEvent: Sendable, Equatable {
    /// The `event:` field, `message` when the event had none.
    public var type: String
    /// The data lines joined with line feeds.
    public var data: String
    /// The last event id in force when the event was dispatched (ids persist across events).
    public var lastEventId: String
    /// Whether this event carried an `id:` line of its own.
    public var hasId: Bool

    public init(type: String = "message", data: String, lastEventId: String = "", hasId: Bool = false) {
        self.type = type
        self.data = data
        self.lastEventId = lastEventId
        self.hasId = hasId
    }
}

/// What the parser read from a stream: an event, a new reconnection time or a comment.
public enum EventStreamItem: Sendable, Equatable {
    case event(ServerSentEvent)
    /// A `retry:` line: the reconnection time in milliseconds.
    case retry(Int)
    /// A line starting with a colon, without the colon and the space after it.
    case comment(String)
}

/// The parser of the HTML standard's "event stream interpretation", fed bytes as they arrive.
///
/// The one SSE parser of the project: the Swift client reads its `/events` stream through it, and
/// the tests read every stream kind through it. Lines end with CRLF, LF or CR (a CR at the end of
/// one chunk waits for the next to see whether an LF follows); a leading byte-order mark is
/// dropped; an `id` holding U+0000 is ignored; `retry` takes ASCII digits only; a block without
/// data dispatches nothing.
public struct EventStreamParser: Sendable {
    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var type = ""
    private var idSeen = false
    private var pendingCR = false
    private var atStart = true
    /// The last event id in force, as `EventSource.lastEventId` holds it.
    public private(set) var lastEventId = ""

    public init(lastEventId: String = "") { self.lastEventId = lastEventId }

    /// Reads `bytes`, returning what they completed, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [EventStreamItem] {
        var items: [EventStreamItem] = []
        for byte in bytes {
            if pendingCR {
                pendingCR = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D:
                pendingCR = true
                endLine(into: &items)
            case 0x0A:
                endLine(into: &items)
            default:
                line.append(byte)
            }
        }
        return items
    }

    /// Forgets a half-read event, as a reconnection does; the last event id stays.
    public mutating func reset() {
        line = []
        data = []
        hasData = false
        type = ""
        idSeen = false
        pendingCR = false
        atStart = true
    }

    private mutating func endLine(into items: inout [EventStreamItem]) {
        if atStart {
            atStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        defer { line.removeAll(keepingCapacity: true) }
        guard let first = line.first else { return dispatch(into: &items) }
        if first == UInt8(ascii: ":") {
            var comment = line.dropFirst()
            if comment.first == UInt8(ascii: " ") { comment = comment.dropFirst() }
            items.append(.comment(String(decoding: comment, as: UTF8.self)))
            return
        }
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let name = line[..<(colon ?? line.endIndex)]
        var value = colon.map { line[line.index(after: $0)...] } ?? []
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        switch String(decoding: name, as: UTF8.self) {
        case "event": type = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
        case "id" where !value.contains(0):
            lastEventId = String(decoding: value, as: UTF8.self)
            idSeen = true
        case "retry" where !value.isEmpty && value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) && value.count <= 12:
            items.append(.retry(Int(String(decoding: value, as: UTF8.self))!))
        default: break
        }
    }

    private mutating func dispatch(into items: inout [EventStreamItem]) {
        defer {
            data.removeAll(keepingCapacity: true)
            hasData = false
            type = ""
            idSeen = false
        }
        guard hasData else { return }
        items.append(
            .event(
                ServerSentEvent(
                    type: type.isEmpty ? "message" : type, data: String(decoding: data, as: UTF8.self),
                    lastEventId: lastEventId, hasId: idSeen)))
    }
}
