import JSON

import enum Digest.Base64URL

/// Verifies JSON Web Tokens signed with JWS compact serialization (RFC 7519, RFC 7515), strictly:
/// the algorithm is the key's (`JSONWebKeySet`), the header may carry only `alg`, `kid`, `typ`
/// and `cty`-free members it understands (`crit` is refused: no extension is understood here),
/// `exp` is required, `nbf` is honoured, `aud` and `iss` are checked when configured, `sub` names
/// the principal. Times are whole seconds since 1970; `leeway` allows for clocks that disagree.
package struct TokenVerifier: Sendable {
    package let keys: JSONWebKeySet
    package let audience: String?
    package let issuer: String?
    package let leeway: Int

    /// The largest token taken, in bytes (RFC 7519 sets none; a header line has room for 8 KiB).
    package static let maxLength = 8 * 1024

    package init(keys: JSONWebKeySet, audience: String? = nil, issuer: String? = nil, leeway: Int = 30) {
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway
    }

    /// A verified token: who it names, until when, and its claims as sent.
    package struct Verified: Sendable {
        package let subject: String
        package let expires: Int
        package let claims: [(key: String, value: JSONValue)]

        package func claim(_ name: String) -> JSONValue? { claims.first { $0.key == name }?.value }
    }

    package func verify(_ token: some Collection<UInt8>, now: Int) throws(TokenRefusal) -> Verified {
        guard token.count <= Self.maxLength else {
            throw TokenRefusal(.tooLarge, "The token is longer than \(Self.maxLength) bytes.")
        }
        let bytes = Array(token)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw TokenRefusal(.malformed, "The token is not a signed JWT (three base64url parts joined by dots).")
        }
        let header = try Self.object(parts[0], "header")
        let signingInput = bytes[..<(parts[0].count + 1 + parts[1].count)]
        guard let signature = Base64URL.decode(parts[2]) else {
            throw TokenRefusal(.malformed, "The token's signature is not base64url.")
        }
        // The header: `alg`, and the few members understood.
        var algorithmName: String?
        var keyID: String?
        for (name, value) in header {
            switch (name, value) {
            case ("alg", .string(let text)): algorithmName = text
            case ("kid", .string(let text)): keyID = text
            case ("typ", .string(let text)):
                guard ["jwt", "at+jwt", "application/jwt"].contains(text.lowercased()) else {
                    throw TokenRefusal(.malformed, "The token's typ is not JWT.")
                }
            case ("crit", _):
                throw TokenRefusal(
                    .malformed, "The token's header names critical extensions (crit); none is understood here.")
            case ("alg", _), ("kid", _):
                throw TokenRefusal(.malformed, "The token's header member \(name) is not a string.")
            default: break
            }
        }
        guard let algorithmName else { throw TokenRefusal(.malformed, "The token's header has no alg.") }
        guard let algorithm = JSONWebKeySet.Algorithm(rawValue: algorithmName) else {
            throw TokenRefusal(
                .unsupportedAlgorithm,
                "The token's alg is \(algorithmName.prefix(20)); this server takes HS256, ES256 and EdDSA, as its keys say."
            )
        }
        let candidates: [JSONWebKeySet.Key]
        if let keyID {
            guard let key = keys.keys.first(where: { $0.id == keyID }) else {
                throw TokenRefusal(.unknownKey, "No key has the token's kid.")
            }
            guard key.algorithm == algorithm else {
                throw TokenRefusal(
                    .unsupportedAlgorithm,
                    "The token's alg is \(algorithm.rawValue), but its key is for \(key.algorithm.rawValue).")
            }
            candidates = [key]
        } else {
            candidates = keys.keys.filter { $0.algorithm == algorithm }
            guard !candidates.isEmpty else {
                throw TokenRefusal(
                    .unknownKey, "No key is for the token's alg (\(algorithm.rawValue)) and it names no kid.")
            }
        }
        guard candidates.contains(where: { $0.verifies(signature, of: signingInput) }) else {
            throw TokenRefusal(.badSignature, "The token's signature does not verify.")
        }
        // Only a signed payload is read.
        let claims = try Self.object(parts[1], "payload")
        func claim(_ name: String) -> JSONValue? { claims.first { $0.key == name }?.value }
        func seconds(_ name: String) throws(TokenRefusal) -> Int? {
            guard let value = claim(name) else { return nil }
            guard case .number(let text) = value,
                let number = Int(text) ?? Double(text).flatMap({ Int(exactly: $0.rounded(.down)) })
            else { throw TokenRefusal(.badClaims, "The token's \(name) is not a number of seconds.") }
            return number
        }
        guard let expires = try seconds("exp") else { throw TokenRefusal(.badClaims, "The token has no exp.") }
        guard now < expires + leeway else { throw TokenRefusal(.expired, "The token has expired (exp).") }
        if let notBefore = try seconds("nbf"), now + leeway < notBefore {
            throw TokenRefusal(.notYetValid, "The token is not valid yet (nbf).")
        }
        if let audience {
            let audiences: [String]
            switch claim("aud") {
            case .string(let one)?: audiences = [one]
            case .array(let many)?: audiences = many.compactMap { if case .string(let one) = $0 { one } else { nil } }
            default: audiences = []
            }
            guard audiences.contains(audience) else {
                throw TokenRefusal(.wrongAudience, "The token is not for this server's audience (aud).")
            }
        }
        if let issuer {
            guard case .string(let given)? = claim("iss"), given == issuer else {
                throw TokenRefusal(.wrongIssuer, "The token is not from this server's issuer (iss).")
            }
        }
        guard case .string(let subject)? = claim("sub"), !subject.isEmpty, subject.utf8.count <= 255 else {
            throw TokenRefusal(.badClaims, "The token has no sub (1 to 255 bytes) naming who it is for.")
        }
        return Verified(subject: subject, expires: expires, claims: claims)
    }

    /// A base64url part holding a JSON object.
    private static func object(_ part: ArraySlice<UInt8>, _ name: String) throws(TokenRefusal)
        -> [(key: String, value: JSONValue)]
    {
        guard let json = Base64URL.decode(part) else {
            throw TokenRefusal(.malformed, "The token's \(name) is not base64url.")
        }
        guard case .object(let members)? = try? JSONParser.parse(json) else {
            throw TokenRefusal(.malformed, "The token's \(name) is not a JSON object.")
        }
        return members
    }
}
