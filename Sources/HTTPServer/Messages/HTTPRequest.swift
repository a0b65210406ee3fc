/// The HTTP version of a request; only 1.0 and 1.1 are accepted.
package enum HTTPVersion: Sendable, Equatable {
    case http1_0
    case http1_1
}

/// A complete request: head and decoded body.
package struct HTTPRequest: Sendable {
    /// The method token, case-sensitive as RFC 9110 says (`GET`, not `get`).
    package var method: String
    /// The request target as sent, in origin form (`/books?limit=5`) or `*`.
    package var target: String
    package var version: HTTPVersion
    /// The authority of an absolute-form target (`GET http://host:port/path`), which stands for the
    /// `Host` header (RFC 9112 §3.2.2); nil for the usual origin form.
    package var authority: String?
    /// Header fields, names lowercased, kept in the one buffer the head was parsed into.
    package var headers: HTTPRequestHeaders
    /// The body, with any chunked framing removed.
    package var body: [UInt8]
    /// Whether the connection stays open after the response.
    package var keepAlive: Bool

    package init(
        method: String,
        target: String,
        version: HTTPVersion = .http1_1,
        headers: HTTPRequestHeaders = HTTPRequestHeaders(),
        body: [UInt8] = [],
        keepAlive: Bool = true,
        authority: String? = nil
    ) {
        self.authority = authority
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.keepAlive = keepAlive
    }

    /// The target without its query, still percent-encoded.
    package var path: Substring {
        queryMark.map { target[..<$0] } ?? target[...]
    }

    /// The query after `?`, still percent-encoded, or nil.
    package var query: Substring? {
        queryMark.map { target[target.utf8.index(after: $0)...] }
    }

    /// Where `?` is. Searched in the UTF-8 bytes: the target is ASCII, and searching its
    /// `Character`s (grapheme clusters) cost more than the rest of routing together.
    private var queryMark: String.Index? {
        target.utf8.firstIndex(of: UInt8(ascii: "?"))
    }
}
