import HTTPServer

extension LibraryAPI {
    /// With a token configured, a mutating request must carry `Authorization: Bearer <token>`.
    func authorize(_ request: HTTPRequest) throws(APIError) {
        guard let token = configuration.apiToken else { return }
        let header = request.headers["authorization"] ?? ""
        let scheme = header.prefix(7)
        let given = scheme.lowercased() == "bearer " ? String(header.dropFirst(7).trimmedOWS()) : ""
        guard constantTimeEquals(given, token) else {
            var error = APIError(
                .unauthorized,
                "unauthorized",
                header.isEmpty ? "This request needs Authorization: Bearer <token>." : "The bearer token is not valid."
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
