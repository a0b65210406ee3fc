import Foundation

/// Where a client's bearer tokens come from when the app gives a token provider: the provider
/// is asked when there is no token yet, when the one held is about to expire, and once again
/// after the server answers `401` (the token was revoked, or the keys rotated). Concurrent asks
/// share one call of the provider.
actor TokenSource {
    private let provide: @Sendable () async throws -> String
    private var held: String?
    private var asking: Task<String, any Error>?
    /// How long before its `exp` a held token is no longer handed out (the server allows
    /// `--jwt-leeway` for clocks that disagree; this is for the request's own way there).
    private let margin: TimeInterval = 1

    init(_ provide: @escaping @Sendable () async throws -> String) {
        self.provide = provide
    }

    /// The token to send now.
    func token() async throws(LibraryClientError) -> String {
        if let held, let expires = Self.expiry(of: held), expires.timeIntervalSinceNow <= margin {
            self.held = nil
        }
        if let held { return held }
        return try await fresh()
    }

    /// A new token from the provider, held from now on.
    func fresh() async throws(LibraryClientError) -> String {
        let task = asking ?? Task { try await provide() }
        asking = task
        defer { if asking == task { asking = nil } }
        do {
            let token = try await task.value
            held = token
            return token
        } catch {
            throw .unauthorized(detail: "The token provider failed: \(error)")
        }
    }

    /// The server refused `token`: the next `token()` asks the provider.
    func refused(_ token: String) {
        if held == token { held = nil }
    }

    /// When `token` expires, read from its `exp` claim (not verified: only the server can, and
    /// only the time matters here); nil for a token that is not a JWT or has no `exp`.
    nonisolated static func expiry(of token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text),
            let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let exp = claims["exp"] as? NSNumber
        else { return nil }
        return Date(timeIntervalSince1970: exp.doubleValue)
    }
}
