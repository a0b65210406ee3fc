import APICore
import Glibc
import HTTPServer
import JSON
import LiveEngine

/// The live path's endpoints: Server-Sent Events streams of one resource or collection
/// (`ResourceStreams.swift`), and many watches on one stream with a side channel to change them
/// (`WatchStreams.swift`, `Multiplexer`). The REST module routes a request here once its route,
/// method and credentials are checked; from then on the stream is this module's.
///
/// Below it is the live engine (`LiveHub`: models, subscribers, snapshots, replay), which knows
/// nothing of HTTP or of bytes on the wire; this module turns its events into bytes
/// (`EventEncoding`) and writes them onto connections (`EventStreamSink`, `Multiplexer`).
package final class EventStreams: Sendable {
    package let hub: LiveHub
    /// When streams opened with signed tokens end.
    let deadlines: StreamDeadlines

    /// `clock`: the current second since 1970, as the tokens' verifier reads it.
    package init(hub: LiveHub, clock: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        self.hub = hub
        self.deadlines = StreamDeadlines(clock: clock)
    }

    /// How the hub encodes what it sends ahead of its subscribers: a refreshed kept snapshot, and
    /// the rows of a large library's snapshot as they are read. Given to `LiveHub.start`.
    package static let wire = LiveHub.Wire(
        event: EventEncoding.pieces, rows: { JSONWriter.appendRows($0, $1, to: &$2) })
}

/// What a stream endpoint needs of the request it answers: the REST module's exchange, which
/// also logs the request and decorates every answer.
package protocol StreamExchange: AnyObject, Sendable {
    var request: HTTPRequest { get }
    /// Who the request comes from: what the stream may carry, and until when.
    var principal: Principal { get }
    /// Whether the client has hung up since the request came.
    var peerHasGone: Bool { get }
    /// Sends `head` and hands over the connection as a stream; `onClose` runs once it closes.
    func openStream(_ head: HTTPResponse, onClose: @escaping @Sendable () -> Void) -> HTTPStream
    /// Answers with the problem `error` stands for.
    func fail(_ error: any Error)
    /// Ends the request without an answer: the client has gone.
    func abandon()
    /// Answers with `response`.
    func finish(_ response: HTTPResponse)
}
