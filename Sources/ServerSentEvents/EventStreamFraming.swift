/// The bytes of a `text/event-stream` as the server writes them: the one place its framing is
/// spelled (the server's encoder, `EventStreams/EventEncoding.swift`, builds every
/// stream kind from these), beside the one parser (`EventStreamParser`) that the Swift client and
/// the tests read streams with.
///
/// An event is `event:`, `id:` and `data:` lines, each ending in a line feed, and a blank line;
/// the server never writes a carriage return, and its `data:` lines hold JSON, which has no raw
/// line feed.
public enum EventStreamFraming {
    /// How long a client waits before reconnecting, in milliseconds: the first thing every stream
    /// says (`EventSource` honours it; the Swift client starts its backoff from it).
    public static let reconnectionMilliseconds = 2_000

    /// `retry: 2000` and a blank line: the opening of every stream.
    public static let retry = Array("retry: \(reconnectionMilliseconds)\n\n".utf8)

    /// A comment that keeps a silent stream's connection (and the proxies on its way) open.
    public static let keepAlive = Array(": keep-alive\n\n".utf8)

    /// `data: `, the start of a data line; the line ends with `lineEnd`.
    public static let dataPrefix = Array("data: ".utf8)

    /// The end of a line.
    public static let lineEnd: UInt8 = 10

    /// `event: KIND` and its line end.
    public static func eventLine(_ kind: String) -> [UInt8] { Array("event: \(kind)\n".utf8) }

    /// `id: ID` and its line end.
    public static func idLine(_ id: String) -> [UInt8] { Array("id: \(id)\n".utf8) }

    /// A whole event of one data line: `event:`, `id:`, `data:` and the blank line after it.
    public static func event(kind: String, id: String, data: [UInt8]) -> [UInt8] {
        var bytes = eventHead(kind: kind, id: id)
        bytes.reserveCapacity(bytes.count + data.count + 2)
        bytes += data
        bytes += eventEnd
        return bytes
    }

    /// An event of one data line up to its data (`event:`, `id:`, `data: `), for data written
    /// after it in place; `eventEnd` follows the data.
    public static func eventHead(kind: String, id: String) -> [UInt8] {
        Array("event: \(kind)\nid: \(id)\ndata: ".utf8)
    }

    /// The end of the data line and the blank line that ends the event.
    public static let eventEnd = [lineEnd, lineEnd]

    /// A data line: `data: `, `json` and the line end.
    public static func dataLine(_ json: [UInt8]) -> [UInt8] { dataPrefix + json + [lineEnd] }
}
