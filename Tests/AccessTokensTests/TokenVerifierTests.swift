import AccessTokens
import Crypto
import Foundation
import JSON
import LibraryDomain
import TestSupport
import Testing

import enum Digest.Base64URL

/// The verifier against the RFCs' examples and against every rule it enforces: each refusal names
/// the rule, never the token.
@Suite struct TokenVerifierTests {
    // Made on each use from fixed bytes rather than kept in globals: LeakSanitizer (scripts/sanitizers.sh)
    // reports key material a global holds as leaked at exit.
    static var secret: TokenMinter.Signer {
        .hs256(SymmetricKey(data: Array("a secret of thirty-two bytes, or more".utf8)))
    }
    static var ec: TokenMinter.Signer { .es256(try! P256.Signing.PrivateKey(rawRepresentation: seed(1))) }
    static var ed: TokenMinter.Signer { .edDSA(try! Curve25519.Signing.PrivateKey(rawRepresentation: seed(2))) }
    static let now = 1_800_000_000

    /// 32 bytes of a private key, the same on every call.
    static func seed(_ tag: UInt8) -> [UInt8] { (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ tag) | 1 } }

    static func keys(_ jwks: [String]) throws -> JSONWebKeySet {
        try JSONWebKeySet(parsing: Array(#"{"keys":[\#(jwks.joined(separator: ","))]}"#.utf8))
    }

    static var verifier: TokenVerifier {
        let set = try! keys([
            TokenMinter.jwk(secret, kid: "s"), TokenMinter.jwk(ec, kid: "e"), TokenMinter.jwk(ed, kid: "d"),
        ])
        return TokenVerifier(keys: set, audience: "library", issuer: "https://id.example", leeway: 30)
    }

    static let good = #""aud":"library","iss":"https://id.example""#

    func refusal(_ token: String, now: Int = Self.now, verifier: TokenVerifier = Self.verifier) -> TokenRefusal? {
        do {
            _ = try verifier.verify(Array(token.utf8), now: now)
            return nil
        } catch {
            #expect(!error.detail.contains(token.prefix(20)), "a refusal repeats the token")
            return error
        }
    }

    /// RFC 7515 appendix A.1: the HS256 example verifies with its key; it has no `sub`, so the
    /// refusal comes after the signature, from the claims. One changed bit of the signature fails.
    @Test func rfc7515HS256Example_Verifies() throws {
        let key =
            #"{"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}"#
        let verifier = TokenVerifier(keys: try Self.keys([key]), leeway: 0)
        let token =
            "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        #expect(refusal(token, now: 1_300_819_000, verifier: verifier)?.reason == .badClaims)
        #expect(
            refusal(token.replacingOccurrences(of: ".dBjf", with: ".dBjg"), now: 1_300_819_000, verifier: verifier)?
                .reason == .badSignature)
        // A last character with bits set past the data is not base64url as an encoder writes it.
        #expect(refusal(token.dropLast() + "l", now: 1_300_819_000, verifier: verifier)?.reason == .malformed)
        #expect(refusal(token, now: 1_300_819_380, verifier: verifier)?.reason == .expired)
    }

    /// RFC 8037 appendix A.4: the Ed25519 example verifies with the key of A.2; its payload is
    /// text, not claims, so the refusal comes after the signature.
    @Test func rfc8037Ed25519Example_Verifies() throws {
        let key = #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#
        let verifier = TokenVerifier(keys: try Self.keys([key]))
        let token =
            "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
        let after = refusal(token, verifier: verifier)
        #expect(after?.reason == .malformed && after?.detail.contains("payload") == true)
        #expect(
            refusal(token.replacingOccurrences(of: "hgyY", with: "hgyZ"), verifier: verifier)?.reason == .badSignature)
    }

    @Test func tokensOfEachKind_Verify_WithTheirSubjectAndExpiry() throws {
        for (signer, kid) in [(Self.secret, "s"), (Self.ec, "e"), (Self.ed, "d")] {
            for kid in [kid, nil] {
                let token = TokenMinter.token(signer, kid: kid, sub: "ann", exp: Self.now + 60, more: Self.good)
                let verified = try Self.verifier.verify(Array(token.utf8), now: Self.now)
                #expect(verified.subject == "ann" && verified.expires == Self.now + 60)
            }
        }
    }

    @Test func theAlgorithmComesFromTheKey_NeverFromTheToken() throws {
        // alg none, with or without a signature.
        let none =
            Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "."
            + Base64URL.encode(Array(#"{"sub":"x","exp":1900000000}"#.utf8))
        #expect(refusal(none + ".")?.reason == .malformed || refusal(none + ".")?.reason == .unsupportedAlgorithm)
        #expect(refusal(none + ".AAAA")?.reason == .unsupportedAlgorithm)
        // HS256 made with the EC key's public bytes as the secret, naming the EC key, or no key.
        guard case .es256(let privateKey) = Self.ec else { return }
        let publicBytes = Array(privateKey.publicKey.x963Representation)
        let forged = TokenMinter.Signer.hs256(SymmetricKey(data: publicBytes))
        #expect(
            refusal(TokenMinter.token(forged, kid: "e", exp: Self.now + 60, more: Self.good))?.reason
                == .unsupportedAlgorithm)
        let onlyEC = TokenVerifier(keys: try Self.keys([TokenMinter.jwk(Self.ec, kid: "e")]))
        #expect(refusal(TokenMinter.token(forged, exp: Self.now + 60), verifier: onlyEC)?.reason == .unknownKey)
        // A token signed by a key the server does not have.
        let stranger = TokenMinter.Signer.es256(P256.Signing.PrivateKey())
        #expect(
            refusal(TokenMinter.token(stranger, kid: "e", exp: Self.now + 60, more: Self.good))?.reason == .badSignature
        )
        #expect(
            refusal(TokenMinter.token(stranger, kid: "x", exp: Self.now + 60, more: Self.good))?.reason == .unknownKey)
        #expect(
            refusal(TokenMinter.token(header: #"{"alg":"RS256"}"#, claims: "{}", signer: Self.secret))?.reason
                == .unsupportedAlgorithm)
    }

    @Test func timesAudienceIssuerAndSubject_AreChecked() {
        func token(exp: Int = Self.now + 60, more: String = Self.good, sub: String = "ann") -> String {
            TokenMinter.token(Self.ed, kid: "d", sub: sub, exp: exp, more: more)
        }
        #expect(refusal(token(exp: Self.now - 31))?.reason == .expired)
        #expect(refusal(token(exp: Self.now - 29)) == nil)  // within the leeway
        #expect(refusal(token(more: Self.good + #","nbf":\#(Self.now + 31)"#))?.reason == .notYetValid)
        #expect(refusal(token(more: Self.good + #","nbf":\#(Self.now + 29)"#)) == nil)
        #expect(refusal(token(more: #""aud":"elsewhere","iss":"https://id.example""#))?.reason == .wrongAudience)
        #expect(refusal(token(more: #""aud":["x","library"],"iss":"https://id.example""#)) == nil)
        #expect(refusal(token(more: #""aud":"library","iss":"https://other.example""#))?.reason == .wrongIssuer)
        #expect(refusal(token(more: #""aud":"library""#))?.reason == .wrongIssuer)
        #expect(refusal(token(sub: ""))?.reason == .badClaims)
        #expect(refusal(token(more: Self.good + #","exp":1"#))?.reason == .malformed)  // a duplicate member
        let noExpiry = TokenMinter.token(
            header: #"{"alg":"EdDSA","kid":"d"}"#, claims: #"{"sub":"a","aud":"library"}"#, signer: Self.ed)
        #expect(refusal(noExpiry)?.reason == .badClaims)
    }

    @Test func malformedAndOversizedTokens_AreRefusedBeforeAnySignature() {
        #expect(refusal(String(repeating: "a", count: TokenVerifier.maxLength + 1))?.reason == .tooLarge)
        for bad in ["", "a.b", "a.b.c.d", "..", "!!.e30.AA", "e30=.e30.AA"] {
            #expect(refusal(bad)?.reason == .malformed, "\(bad)")
        }
        let critical = TokenMinter.token(
            header: #"{"alg":"EdDSA","kid":"d","crit":["exp"]}"#, claims: "{}", signer: Self.ed)
        #expect(refusal(critical)?.reason == .malformed)
    }
}

@Suite struct JSONWebKeySetTests {
    func failure(_ text: String) -> String? {
        do {
            _ = try JSONWebKeySet(parsing: Array(text.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    @Test func keysOfOtherTypes_AreSkipped_AndBadKeysRefuseTheFile() {
        let ed = #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}"#
        let rsa = #"{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"}"#
        let set = try? JSONWebKeySet(parsing: Array(#"{"keys":[\#(ed),\#(rsa)]}"#.utf8))
        #expect(set?.keys.count == 1 && set?.skipped == 1)
        #expect(failure(#"{"keys":[\#(rsa)]}"#)?.contains("no key") == true)
        #expect(failure(#"{"keys":[\#(ed),\#(ed)]}"#)?.contains("kid") == true)
        #expect(failure(#"{"keys":[{"kty":"oct","k":"c2hvcnQ"}]}"#)?.contains("32 bytes") == true)
        #expect(
            failure(
                #"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","alg":"HS256"}]}"#
            )?.contains("alg") == true)
        #expect(
            failure(
                #"{"keys":[{"kty":"EC","crv":"P-256","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#
            )?.contains("point") == true)
        #expect(failure("[]") != nil && failure("not json") != nil)
    }
}

@Suite struct Base64URLTests {
    @Test func decoding_IsStrict_AndRoundTrips() {
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("Zg") == Array("f".utf8))
        #expect(Base64URL.decode("Zm8") == Array("fo".utf8))
        #expect(Base64URL.decode("Zm9v") == Array("foo".utf8))
        #expect(Base64URL.decode("Zg==") == nil)  // padding
        #expect(Base64URL.decode("Zh") == nil)  // bits set past the data
        #expect(Base64URL.decode("Z") == nil)  // no encoding has this length
        #expect(Base64URL.decode("Zm+v") == nil && Base64URL.decode("Zm/v") == nil)  // base64, not base64url
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }
}

@Suite struct AccessRightsTests {
    func rights(_ json: String) throws -> AccessRights {
        try AccessRights(claim: try JSONParser.parse(Array(json.utf8)))
    }

    @Test func writeImpliesRead_AndAdminImpliesBoth() throws {
        let a = "0b7e5c1e-3f0a-4d5e-9a6b-2c1d0e9f8a7b"
        let b = "5d2c8a90-1b3e-4f6a-8c7d-9e0f1a2b3c4d"
        let librarian = try rights(#"{"read":["\#(a)"],"write":["\#(b.uppercased())"]}"#)
        #expect(librarian.read.contains(a) && librarian.read.contains(b) && librarian.write.contains(b))
        #expect(!librarian.write.contains(a) && !librarian.admin)
        let everyone = try rights(#"{"read":["*"]}"#)
        #expect(everyone.read == .all && everyone.write == .empty)
        #expect(try rights(#"{"admin":true}"#) == .everything)
        #expect(try AccessRights(claim: nil) == AccessRights(read: .empty, write: .empty, admin: false))
        for bad in [#"[]"#, #"{"read":"*"}"#, #"{"read":["nope"]}"#, #"{"admin":1}"#, #"{"delete":[]}"#] {
            #expect(throws: TokenRefusal.self) { try rights(bad) }
        }
    }
}

@Suite struct TokenCacheTests {
    @Test func aTokenIsVerifiedOnce_UntilItExpires_AndTheCacheStaysBounded() throws {
        var cache = TokenCache<String>(capacity: 4)
        var verifications = 0
        func look(_ token: String, now: Int, until: Int = 100) throws -> String {
            try cache.value(for: token, now: now) { () throws(TokenRefusal) in
                verifications += 1
                return ("verified " + token, until)
            }
        }
        #expect(try look("a", now: 0) == "verified a" && verifications == 1)
        #expect(try look("a", now: 99) == "verified a" && verifications == 1)
        #expect(try look("a", now: 100) == "verified a" && verifications == 2)  // expired: verified again
        for index in 0..<50 { _ = try look("t\(index)", now: 0) }
        #expect(cache.count <= 4)
        #expect(throws: TokenRefusal.self) {
            try cache.value(for: "bad", now: 0) { () throws(TokenRefusal) -> (value: String, until: Int) in
                throw TokenRefusal(.badSignature, "no")
            }
        }
    }

    /// The cache hashes a token by its signature (its last 64 bytes) but takes only the very same
    /// token as a hit: one that copies a verified token's signature onto other claims is verified.
    @Test func aTokenWithAnotherTokensSignatureIsNotACacheHit() throws {
        var cache = TokenCache<String>()
        let signature = String(repeating: "s", count: 86)
        let good = "header.claims-of-a-reader." + signature
        let forged = "header.claims-of-an-admin." + signature
        #expect(try cache.value(for: good, now: 0) { () throws(TokenRefusal) in ("reader", 100) } == "reader")
        #expect(throws: TokenRefusal.self) {
            try cache.value(for: forged, now: 0) { () throws(TokenRefusal) -> (value: String, until: Int) in
                throw TokenRefusal(.badSignature, "the signature does not match these claims")
            }
        }
        #expect(try cache.value(for: good, now: 1) { () throws(TokenRefusal) in ("again", 100) } == "reader")
    }
}
