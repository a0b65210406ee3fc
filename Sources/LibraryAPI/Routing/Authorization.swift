import APICore
import AccessTokens
import HTTPServer
import LibraryDomain

extension LibraryAPI {
    /// Who `request` comes from, for a route that needs `need`; a 401 when it needs a credential
    /// and has none that verifies.
    ///
    /// Without `--jwt-keys`, the static tokens decide as they always have: with `--api-token` a
    /// write needs it; with `--read-token` a read needs it or the API token; otherwise anyone may.
    /// With `--jwt-keys`, every data route needs a credential: either static token, or a signed
    /// token whose rights the handlers then apply. Every static token is compared, in constant
    /// time, so the time taken says nothing about which one came close. No token is ever echoed.
    /// Two `Authorization` fields are a 400: the field is a singleton, and a proxy and the server
    /// could each pick a different one.
    func principal(_ request: HTTPRequest, for need: Need) throws(APIError) -> Principal {
        let signed = configuration.signedTokens
        let required: Bool
        switch need {
        case .nothing: return .everything
        case .write: required = signed != nil || configuration.apiToken != nil
        case .read, .stream: required = signed != nil || configuration.readToken != nil
        }
        // Nothing asked of this request: its headers are not even looked at.
        guard required else { return .everything }
        let header = request.headers["authorization"]
        if header != nil, request.headers.values("authorization").count > 1 {
            throw .badRequest("Authorization is given more than once; send one credential.")
        }
        var given: String?
        if let header, header.prefix(7).lowercased() == "bearer " {
            given = String(header.dropFirst(7).trimmedOWS())
        } else if need == .stream {
            // `EventSource` cannot send headers: a stream may carry its token in the URL.
            given = try QueryParameters(request.query).string("access_token")
        }
        guard let given, !given.isEmpty else {
            throw Self.unauthorized("This request needs Authorization: Bearer <token>.")
        }
        let api = configuration.apiToken.map { constantTimeEquals(given, $0) } ?? false
        let read = configuration.readToken.map { constantTimeEquals(given, $0) } ?? false
        if api { return .everything }
        if read, need != .write { return .readEverything }
        guard let signed, !read else { throw Self.unauthorized("The bearer token is not valid.") }
        do {
            return try signed.principal(given, keep: need != .stream)
        } catch {
            var refusal = Self.unauthorized(error.detail)
            refusal.headers.set("WWW-Authenticate", "Bearer realm=\"library-server\", error=\"invalid_token\"")
            throw refusal
        }
    }

    /// What a route needs of its caller.
    enum Need {
        /// Nothing: the route has no data (health, the spec, the console's files, a preflight).
        case nothing
        case read
        /// A read whose caller may be a browser's `EventSource`: the token may be in the URL.
        case stream
        case write
    }

    private static func unauthorized(_ detail: String) -> APIError {
        var error = APIError(.unauthorized, "unauthorized", detail)
        error.headers.set("WWW-Authenticate", "Bearer realm=\"library-server\"")
        return error
    }
}

/// Compares two strings in time that depends only on their lengths, so the comparison does not
/// leak how much of a guessed token was right. Strings of different lengths are unequal at once:
/// that tells a guesser the configured token's length, which a random token need not hide, and
/// keeps a long signed token from paying a byte-by-byte pass against each static one.
func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
    guard lhs.utf8.count == rhs.utf8.count else { return false }
    var difference: UInt8 = 0
    for (x, y) in zip(lhs.utf8, rhs.utf8) { difference |= x ^ y }
    return difference == 0
}
