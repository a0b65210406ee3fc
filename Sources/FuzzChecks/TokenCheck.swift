import AccessTokens
import LibraryDomain

import enum Digest.Base64URL

/// The token path's invariants on arbitrary bytes, for the fuzz target (`library-fuzz jwt`) and its
/// regression tests: verifying a token, reading a key set and base64url never trap; a refusal is a
/// `TokenRefusal`; whatever base64url decodes encodes back to the same text.
package enum TokenCheck {
    /// One key of each kind the verifier takes (the HS256 secret is `fuzz-secret-…`, 32 bytes).
    ///
    /// Made for each input rather than kept in a global: LeakSanitizer reported a key set kept in a
    /// global as leaked at exit (the Ed25519 key's bytes, reached through the set's keys), which
    /// stopped the fuzzer at its first input.
    static func verifier() -> TokenVerifier {
        let keys = try! JSONWebKeySet(
            parsing: Array(
                """
                {"keys": [
                  {"kty": "oct", "kid": "h", "k": "ZnV6ei1zZWNyZXQtMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"},
                  {"kty": "EC", "kid": "e", "crv": "P-256",
                   "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
                  {"kty": "OKP", "kid": "d", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
                ]}
                """.utf8))
        return TokenVerifier(keys: keys, audience: "library", issuer: nil, leeway: 30)
    }

    /// Whether `bytes` is a token the check's keys verify (the corpus's valid seed).
    package static func verifies(_ bytes: [UInt8]) -> Bool {
        (try? verifier().verify(bytes, now: 1_700_000_000)) != nil
    }

    /// Runs the checks; traps (so the fuzzer reports the input) when one fails.
    package static func run(_ bytes: [UInt8]) {
        do {
            let verified = try verifier().verify(bytes, now: 1_700_000_000)
            precondition(!verified.subject.isEmpty, "a verified token without a subject")
            _ = try? AccessRights(claim: verified.claim("libraries"))
        } catch {
            precondition(!error.detail.isEmpty, "a refusal that says nothing")
        }
        _ = try? JSONWebKeySet(parsing: bytes)
        if let decoded = Base64URL.decode(bytes) {
            precondition(Array(Base64URL.encode(decoded).utf8) == bytes, "base64url did not encode back the same")
        }
    }
}
