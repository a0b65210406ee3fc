/// Why a bearer token was refused: the rule it broke, never the token. Answered as a 401 with
/// `WWW-Authenticate: Bearer error="invalid_token"` and this `detail`; `reason` labels the metric.
package struct TokenRefusal: Error, Sendable, Equatable {
    package enum Reason: String, Sendable, CaseIterable {
        case tooLarge = "too_large"
        case malformed
        case unsupportedAlgorithm = "unsupported_algorithm"
        case unknownKey = "unknown_key"
        case badSignature = "bad_signature"
        case expired
        case notYetValid = "not_yet_valid"
        case wrongAudience = "wrong_audience"
        case wrongIssuer = "wrong_issuer"
        case badClaims = "bad_claims"
    }

    package let reason: Reason
    package let detail: String

    package init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}
