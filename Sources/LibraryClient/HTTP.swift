import AsyncHTTPClient
import Foundation
import JSON
import NIOCore
import NIOHTTP1

/// An HTTP answer, read whole.
struct Answer: Sendable {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    var json: JSONValue? { try? JSONValue.decode(body) }
    var error: LibraryClientError { LibraryClientError(status: status, headers: headers, body: body) }
}

extension LibraryClient {
    /// The largest answer body the client reads (a page of 500 books is about 150 KB).
    static let maximumAnswer = 8 << 20

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
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer " + token) }
        request.headers.add(name: "Accept", value: "application/json")
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: contentType)
            request.body = .bytes(ByteBuffer(bytes: body.encoded))
        }
        do {
            let response = try await http.execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: Self.maximumAnswer)
            return Answer(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                body: Array(bytes.readableBytesView))
        } catch {
            throw .transport(String(describing: error))
        }
    }
}
