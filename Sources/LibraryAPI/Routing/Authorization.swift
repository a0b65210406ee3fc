import APICore
import HTTPServer

extension LibraryAPI {
    /// With a token configured, a mutating request must carry `Authorization: Bearer <token>`.
    func authorize(_ request: HTTPRequest) throws(APIError) {
        guard let token = configuration.apiToken else { return }
        try Self.requireBearer(request, accepting: [token], queryToken: nil)
    }

    /// With a read token configured, a read must carry the read token or the write token, as
    /// `Authorization: Bearer` or, for an event stream (`EventSource` cannot send headers), as
    /// `?access_token=`.
    func authorizeRead(_ request: HTTPRequest, stream: Bool) throws(APIError) {
        guard let readToken = configuration.readToken else { return }
        let accepted = [readToken] + (configuration.apiToken.map { [$0] } ?? [])
        var queryToken: String?
        if stream {
            queryToken = try QueryParameters(request.query).string("access_token")
        }
        try Self.requireBearer(request, accepting: accepted, queryToken: queryToken)
    }

    /// Passes when the bearer credential (or `queryToken`) is one of `accepted`; a 401 with
    /// `WWW-Authenticate: Bearer` otherwise. Every accepted token is compared, in constant time,
    /// so the time taken says nothing about which one came close. No token is ever echoed. Two
    /// `Authorization` fields are a 400: the field is a singleton, and a proxy and the server could
    /// each pick a different one.
    private static func requireBearer(
        _ request: HTTPRequest,
        accepting accepted: [String],
        queryToken: String?
    ) throws(APIError) {
        let header = request.headers["authorization"]
        if header != nil, request.headers.values("authorization").count > 1 {
            throw .badRequest("Authorization is given more than once; send one credential.")
        }
        var given: [String] = queryToken.map { [$0] } ?? []
        if let header, header.prefix(7).lowercased() == "bearer " {
            given.append(String(header.dropFirst(7).trimmedOWS()))
        }
        var matched = false
        for candidate in given {
            for token in accepted where constantTimeEquals(candidate, token) { matched = true }
        }
        guard matched else {
            let missing = header == nil && queryToken == nil
            var error = APIError(
                .unauthorized,
                "unauthorized",
                missing ? "This request needs Authorization: Bearer <token>." : "The bearer token is not valid."
            )
            error.headers.set("WWW-Authenticate", "Bearer realm=\"library-server\"")
            throw error
        }
    }
}

/// Compares two strings in time that depends only on their lengths, so the comparison does not
/// leak how much of a guessed token was right.
func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
    let a = Array(lhs.utf8)
    let b = Array(rhs.utf8)
    var difference = UInt8(a.count == b.count ? 0 : 1)
    for index in 0..<max(a.count, b.count) {
        let x = index < a.count ? a[index] : 0
        let y = index < b.count ? b[index] : 0
        difference |= x ^ y
    }
    return difference == 0
}
