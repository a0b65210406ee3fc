import AsyncHTTPClient
import Foundation
import JSON
import NIOCore
import NIOHTTP1
import ServerSentEvents

/// An HTTP answer, read whole.
struct Answer: Sendable {
    let status: Int
    var headers: [(String, String)]
    let body: [UInt8]

    var json: JSONValue? { try? JSONValue.decode(body) }
    var error: LibraryClientError { LibraryClientError(status: status, headers: headers, body: body) }
}

/// One request as the client makes it: the method, the path below the base URL (with its query),
/// the headers and the JSON body.
struct TransportRequest: Sendable {
    let method: HTTPMethod
    let path: String
    var headers: [(String, String)]
    var body: JSONValue?
}

/// The opening of a client's `POST /events`: the server refused it, or the stream's items, read
/// and decoded off the main actor, with a way to stop reading them.
enum StreamOpening: Sendable {
    case refused(Answer)
    case opened(streamID: String?, items: AsyncStream<StreamItem>, stop: @Sendable () -> Void)
}

/// Where a client's requests go: a server over HTTP (`HTTPTransport`), or a backend in this
/// process's memory (`InMemoryLibraryBackend`). The client above it is the same.
protocol ClientTransport: Sendable {
    /// One request, its answer read whole; no answer is a `.transport` error.
    func send(_ request: TransportRequest) async throws(LibraryClientError) -> Answer
    /// Opens the stream of `request` (`POST /events`); no answer is a `.transport` error.
    func openStream(_ request: TransportRequest) async throws(LibraryClientError) -> StreamOpening
}

/// A server over HTTP, through AsyncHTTPClient (which streams response bodies on Linux and on
/// Apple platforms).
struct HTTPTransport: ClientTransport {
    /// Where the server answers, with any path prefix and no trailing `/`.
    let base: String
    let http: HTTPClient

    /// The largest answer body the client reads (a page of 500 books is about 150 KB).
    static let maximumAnswer = 8 << 20

    func send(_ request: TransportRequest) async throws(LibraryClientError) -> Answer {
        do {
            let response = try await http.execute(outgoing(request), timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: Self.maximumAnswer)
            return Answer(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                body: Array(bytes.readableBytesView))
        } catch {
            throw .transport(String(describing: error))
        }
    }

    func openStream(_ request: TransportRequest) async throws(LibraryClientError) -> StreamOpening {
        let response: HTTPClientResponse
        do {
            response = try await http.execute(outgoing(request), timeout: .seconds(30))
        } catch {
            throw .transport(String(describing: error))
        }
        guard response.status == .ok else {
            let bytes = (try? await response.body.collect(upTo: 1 << 20)).map { Array($0.readableBytesView) } ?? []
            return .refused(
                Answer(
                    status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                    body: bytes))
        }
        let (items, sink) = AsyncStream<StreamItem>.makeStream()
        let reader = Task.detached { await Self.read(response.body, into: sink) }
        // The reader stops when the items are no longer read, or when it is told to.
        sink.onTermination = { _ in reader.cancel() }
        return .opened(streamID: response.headers.first(name: "Stream-Id"), items: items, stop: { reader.cancel() })
    }

    private func outgoing(_ request: TransportRequest) -> HTTPClientRequest {
        var outgoing = HTTPClientRequest(url: base + request.path)
        outgoing.method = request.method
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body.encoded)) }
        return outgoing
    }

    /// Reads the body off the main actor: SSE framing and JSON decoding happen here.
    private static func read(_ body: HTTPClientResponse.Body, into sink: AsyncStream<StreamItem>.Continuation) async {
        var parser = EventStreamParser()
        do {
            for try await buffer in body {
                sink.yield(.activity(bytes: buffer.readableBytes))
                for item in parser.feed(buffer.readableBytesView) {
                    switch item {
                    case .event(let event) where event.type == "expired":
                        sink.yield(.expired)
                    case .event(let event):
                        guard let entries = try? JSONValue.decode(Array(event.data.utf8)).array else { continue }
                        sink.yield(.frame(seq: Int(event.lastEventId), entries: StreamItem.entries(of: entries)))
                    case .retry(let milliseconds): sink.yield(.retry(milliseconds))
                    case .comment: break
                    }
                }
            }
        } catch {}
        sink.finish()
    }
}

extension StreamItem {
    /// A frame's entries, `{"watch", "event", "data"}` each; one missing a member is skipped.
    static func entries(of array: [JSONValue]) -> [(watch: String, event: String, data: JSONValue)] {
        array.compactMap { entry in
            guard let watch = entry["watch"]?.string, let kind = entry["event"]?.string, let data = entry["data"]
            else { return nil }
            return (watch, kind, data)
        }
    }
}

extension LibraryClient {
    /// One request, its answer read whole. Reads (and `read` requests, such as a change of the
    /// stream's watches) carry the read token (or the write token), writes the write token; with
    /// a token provider, its token, and a `401` asks the provider once more and sends again. A
    /// request that gets no answer is a `.transport` error.
    nonisolated func send(
        _ method: HTTPMethod, _ path: String, json body: JSONValue? = nil, contentType: String = "application/json",
        headers extra: [(String, String)] = [], read: Bool = false
    ) async throws(LibraryClientError) -> Answer {
        let write = !read && method != .GET && method != .HEAD
        guard let tokens else {
            return try await attempt(
                method, path, json: body, contentType: contentType, headers: extra,
                token: write ? apiToken : (readToken ?? apiToken))
        }
        let token = try await tokens.token()
        let answer = try await attempt(method, path, json: body, contentType: contentType, headers: extra, token: token)
        guard answer.status == 401 else { return answer }
        await tokens.refused(token)
        return try await attempt(
            method, path, json: body, contentType: contentType, headers: extra, token: try await tokens.token())
    }

    /// One request with `token`, as it is (no provider, no second try).
    nonisolated func attempt(
        _ method: HTTPMethod, _ path: String, json body: JSONValue?, contentType: String,
        headers extra: [(String, String)],
        token: String?
    ) async throws(LibraryClientError) -> Answer {
        var headers: [(String, String)] = [("Accept", "application/json")]
        if let token { headers.append(("Authorization", "Bearer " + token)) }
        headers += extra
        if body != nil { headers.append(("Content-Type", contentType)) }
        return try await transport.send(TransportRequest(method: method, path: path, headers: headers, body: body))
    }
}
