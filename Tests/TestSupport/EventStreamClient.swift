import Foundation
import ServerSentEvents

/// One server-sent event as a client sees it.
package struct ReceivedEvent: Sendable {
    package var event = "message"
    package var id: String?
    package var data = ""

    package init(event: String = "message", id: String? = nil, data: String = "") {
        self.event = event
        self.id = id
        self.data = data
    }

    /// The data parsed as a JSON object.
    package var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }

    /// The data parsed as a JSON array of objects (a `/events` frame's entries).
    package var entries: [[String: Any]] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [[String: Any]] ?? []
    }
}

/// Reads an event stream (chunked `text/event-stream`) the way `EventSource` does.
package final class EventStreamClient {
    package let connection: TestConnection
    package let head: TestResponse
    private var parser = EventStreamParser()
    private var ready: [ReceivedEvent] = []
    /// Comment lines seen so far (without the colon).
    package private(set) var comments: [String] = []
    /// Whether the server ended the stream.
    package private(set) var ended = false

    /// Opens `GET path` (or `POST path` with a JSON `body`) with the given headers on a new
    /// connection to `port`.
    package init(port: Int, path: String, headers: [String: String] = [:], body: String? = nil) throws {
        connection = try TestConnection(port: port)
        var request = "\(body == nil ? "GET" : "POST") \(path) HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        if let body {
            request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
            try connection.send(request)
        } else {
            try connection.send(request + "\r\n")
        }
        var head = try connection.readHead()
        if head.status != 200 {
            if let length = head.header("content-length").flatMap(Int.init) {
                head.body = try connection.read(count: length)  // the problem, for the test to read
            }
        }
        self.head = head
    }

    /// The next event; nil when the stream ended. Throws when none arrives within `timeout` ms.
    package func next(timeout: Int = 5000) throws -> ReceivedEvent? {
        let deadline = Date().addingTimeInterval(Double(timeout) / 1000)
        while true {
            if let event = takeEvent() { return event }
            guard !ended else { return nil }
            let remaining = Int(deadline.timeIntervalSinceNow * 1000)
            guard remaining > 0 else { throw TestError("no event within \(timeout) ms") }
            connection.setTimeout(milliseconds: remaining)
            guard let sizeLine = try connection.readLine(), let size = Int(sizeLine, radix: 16) else {
                ended = true
                continue
            }
            if size == 0 {
                _ = try connection.readLine()
                ended = true
                continue
            }
            for item in parser.feed(try connection.read(count: size)) {
                switch item {
                case .event(let event):
                    ready.append(
                        ReceivedEvent(event: event.type, id: event.hasId ? event.lastEventId : nil, data: event.data))
                case .comment(let comment): comments.append(comment.trimmingCharacters(in: .whitespaces))
                case .retry: break
                }
            }
            _ = try connection.readLine()
        }
    }

    /// Events until none arrives for `quiet` ms (or the stream ends).
    package func drain(quiet: Int = 300) -> [ReceivedEvent] {
        var events: [ReceivedEvent] = []
        while let event = try? next(timeout: quiet) { events.append(event) }
        return events
    }

    /// The `count` events a test knows are coming (each within the usual timeout, so a busy
    /// machine does not pass for a quiet stream), then any more until none arrives for `quiet` ms.
    package func drain(atLeast count: Int, quiet: Int = 300) throws -> [ReceivedEvent] {
        var events: [ReceivedEvent] = []
        while events.count < count, let event = try next() { events.append(event) }
        return events + drain(quiet: quiet)
    }

    /// The oldest event the parser completed and nobody took yet.
    private func takeEvent() -> ReceivedEvent? {
        ready.isEmpty ? nil : ready.removeFirst()
    }
}
