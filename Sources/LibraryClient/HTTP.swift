import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// An HTTP answer, read whole.
struct Answer: Sendable {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    var json: JSON? { try? JSON.decode(body) }
    var error: LibraryClientError { LibraryClientError(status: status, headers: headers, body: body) }
}

extension LibraryClient {
    /// The largest answer body the client reads (a page of 500 books is about 150 KB).
    static let maximumAnswer = 8 << 20

    /// One request, its answer read whole. Reads (and `read` requests, such as a change of the
    /// stream's watches) carry the read token (or the write token), writes the write token. A request that gets no answer is a `.transport` error.
    nonisolated func send(
        _ method: HTTPMethod, _ path: String, json body: JSON? = nil, contentType: String = "application/json",
        headers extra: [(String, String)] = [], read: Bool = false
    ) async throws(LibraryClientError) -> Answer {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        let write = !read && method != .GET && method != .HEAD
        if let token = write ? apiToken : (readToken ?? apiToken) {
            request.headers.add(name: "Authorization", value: "Bearer " + token)
        }
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
