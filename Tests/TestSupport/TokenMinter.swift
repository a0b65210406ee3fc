import Crypto
import Foundation

import enum Digest.Base64URL

/// Makes signed tokens for the tests: a header and claims as JSON text, signed with a key of each
/// kind the verifier takes (`AccessTokens.TokenVerifier`).
package struct TokenMinter {
    package enum Signer {
        case hs256(SymmetricKey)
        case es256(P256.Signing.PrivateKey)
        case edDSA(Curve25519.Signing.PrivateKey)

        /// HS256 with `secret`'s bytes, for tests that do not import Crypto.
        package static func hs256(secret: String) -> Signer { .hs256(SymmetricKey(data: Array(secret.utf8))) }

        package var algorithm: String {
            switch self {
            case .hs256: "HS256"
            case .es256: "ES256"
            case .edDSA: "EdDSA"
            }
        }
    }

    package static func token(header: String, claims: String, signer: Signer) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let data = Array(input.utf8)
        let signature: [UInt8]
        switch signer {
        case .hs256(let key): signature = Array(HMAC<SHA256>.authenticationCode(for: data, using: key))
        case .es256(let key): signature = Array(try! key.signature(for: data).rawRepresentation)
        case .edDSA(let key): signature = Array(try! key.signature(for: data))
        }
        return input + "." + Base64URL.encode(signature)
    }

    /// A token of `signer` with `kid`, for `sub`, expiring at `exp`, with more claims as JSON members.
    package static func token(
        _ signer: Signer, kid: String? = nil, sub: String = "reader-1", exp: Int, more: String = ""
    )
        -> String
    {
        let header = kid.map { #"{"alg":"\#(signer.algorithm)","kid":"\#($0)"}"# } ?? #"{"alg":"\#(signer.algorithm)"}"#
        let claims = #"{"sub":"\#(sub)","exp":\#(exp)\#(more.isEmpty ? "" : "," + more)}"#
        return token(header: header, claims: claims, signer: signer)
    }

    /// The JWK of a signer's public side (or of the secret).
    package static func jwk(_ signer: Signer, kid: String?) -> String {
        let id = kid.map { #","kid":"\#($0)""# } ?? ""
        switch signer {
        case .hs256(let key):
            let bytes = key.withUnsafeBytes { Array($0) }
            return #"{"kty":"oct","k":"\#(Base64URL.encode(bytes))"\#(id)}"#
        case .es256(let key):
            let point = Array(key.publicKey.x963Representation)
            return
                #"{"kty":"EC","crv":"P-256","x":"\#(Base64URL.encode(point[1...32]))","y":"\#(Base64URL.encode(point[33...]))"\#(id)}"#
        case .edDSA(let key):
            return
                #"{"kty":"OKP","crv":"Ed25519","x":"\#(Base64URL.encode(Array(key.publicKey.rawRepresentation)))"\#(id)}"#
        }
    }
}

extension TokenMinter {
    /// A JWK set of the signers' public sides, each with its `kid`.
    package static func keySet(_ signers: [(Signer, String?)]) -> String {
        #"{"keys":["# + signers.map { jwk($0.0, kid: $0.1) }.joined(separator: ",") + "]}"
    }
}
