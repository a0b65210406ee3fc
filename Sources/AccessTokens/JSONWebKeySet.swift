import Crypto
import JSON

import enum Digest.Base64URL

/// The keys tokens are verified with: a JSON Web Key Set (RFC 7517 §5), as `--jwt-keys` names it.
///
/// Each key fixes the one algorithm a token signed with it may name (RFC 7518): an `oct` key is
/// HS256, an `EC` key on P-256 is ES256, an `OKP` key on Ed25519 is EdDSA (RFC 8037). The token
/// never chooses: `alg: none`, or HS256 with a public key's bytes as its secret, names another
/// algorithm than its key's and is refused. Keys of other types (RSA, other curves) are skipped and
/// counted, so an identity provider's whole set can be given as it is; a key that is malformed,
/// names an algorithm its type cannot have, or repeats another's `kid` makes the whole set refused.
package struct JSONWebKeySet: Sendable {
    package enum Algorithm: String, Sendable {
        case hs256 = "HS256"
        case es256 = "ES256"
        case edDSA = "EdDSA"
    }

    package struct Key: Sendable {
        package let id: String?
        package let algorithm: Algorithm
        let material: Material

        enum Material: Sendable {
            case secret(SymmetricKey)
            case p256(P256.Signing.PublicKey)
            case ed25519(Curve25519.Signing.PublicKey)
        }

        /// Whether `signature` signs `input` with this key.
        func verifies(_ signature: [UInt8], of input: ArraySlice<UInt8>) -> Bool {
            switch material {
            case .secret(let key):
                return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: input, using: key)
            case .p256(let key):
                guard signature.count == 64, let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
                else { return false }
                return key.isValidSignature(parsed, for: input)
            case .ed25519(let key):
                return signature.count == 64 && key.isValidSignature(signature, for: input)
            }
        }
    }

    /// Why a key file was refused.
    package struct Failure: Error, Sendable, Equatable {
        package let message: String
    }

    package let keys: [Key]
    /// Keys of types this server does not verify with (RSA, other curves), left out.
    package let skipped: Int

    /// The shortest HS256 secret taken: RFC 7518 §3.2 asks for a key at least as long as the hash.
    package static let minimumSecretBytes = 32

    package init(parsing bytes: [UInt8]) throws(Failure) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw Failure(message: "the key file is not JSON: \(error.message) at byte \(error.offset)")
        }
        guard case .object(let members) = document, let list = members.first(where: { $0.key == "keys" })?.value,
            case .array(let items) = list
        else { throw Failure(message: "the key file is not a JWK set: an object with a \"keys\" array") }
        var keys: [Key] = []
        var skipped = 0
        var ids: Set<String> = []
        for (index, item) in items.enumerated() {
            guard case .object(let fields) = item else { throw Failure(message: "key \(index) is not an object") }
            func text(_ name: String) throws(Failure) -> String? {
                guard let value = fields.first(where: { $0.key == name })?.value else { return nil }
                guard case .string(let text) = value else {
                    throw Failure(message: "key \(index): \"\(name)\" is not a string")
                }
                return text
            }
            func bytes(_ name: String, count: Int? = nil) throws(Failure) -> [UInt8] {
                guard let encoded = try text(name), let decoded = Base64URL.decode(encoded) else {
                    throw Failure(message: "key \(index): \"\(name)\" is missing or not base64url")
                }
                if let count, decoded.count != count {
                    throw Failure(message: "key \(index): \"\(name)\" is \(decoded.count) bytes, not \(count)")
                }
                return decoded
            }
            if let use = try text("use"), use != "sig" { continue }  // an encryption key: not for tokens
            let id = try text("kid")
            let named = try text("alg")
            let algorithm: Algorithm
            let material: Key.Material
            switch try text("kty") {
            case "oct":
                let secret = try bytes("k")
                guard secret.count >= Self.minimumSecretBytes else {
                    throw Failure(
                        message: "key \(index): an HS256 secret needs at least \(Self.minimumSecretBytes) bytes")
                }
                (algorithm, material) = (.hs256, .secret(SymmetricKey(data: secret)))
            case "EC":
                guard try text("crv") == "P-256" else {
                    skipped += 1
                    continue
                }
                let point = [0x04] + (try bytes("x", count: 32)) + (try bytes("y", count: 32))
                guard let key = try? P256.Signing.PublicKey(x963Representation: point) else {
                    throw Failure(message: "key \(index): x and y are not a point of P-256")
                }
                (algorithm, material) = (.es256, .p256(key))
            case "OKP":
                guard try text("crv") == "Ed25519" else {
                    skipped += 1
                    continue
                }
                guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: try bytes("x", count: 32)) else {
                    throw Failure(message: "key \(index): x is not an Ed25519 public key")
                }
                (algorithm, material) = (.edDSA, .ed25519(key))
            case nil:
                throw Failure(message: "key \(index) has no \"kty\"")
            default:
                skipped += 1
                continue
            }
            if let named, named != algorithm.rawValue {
                throw Failure(
                    message: "key \(index): \"alg\" is \(named), but a key of its type is \(algorithm.rawValue)")
            }
            if let id, !ids.insert(id).inserted {
                throw Failure(message: "key \(index): another key has the kid \"\(id)\"")
            }
            keys.append(Key(id: id, algorithm: algorithm, material: material))
        }
        guard !keys.isEmpty else {
            throw Failure(message: "the key file has no key this server verifies with (oct, EC P-256, OKP Ed25519)")
        }
        self.keys = keys
        self.skipped = skipped
    }
}
