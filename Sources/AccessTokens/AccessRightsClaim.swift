import JSON
import LibraryDomain

/// The rights claim of a token (`libraries` unless `--jwt-claim` names another):
/// `{"read": [ids], "write": [ids], "admin": bool}`, where `"*"` stands for every library. A claim
/// that is absent gives no right at all; one that is malformed refuses the token.
extension AccessRights {
    /// The most library ids a claim may list, per right.
    package static let maxListed = 10_000

    /// Reads the claim; nil (absent) is no right.
    package init(claim: JSONValue?) throws(TokenRefusal) {
        guard let claim else {
            self.init(read: .empty, write: .empty, admin: false)
            return
        }
        guard case .object(let members) = claim else {
            throw TokenRefusal(.badClaims, "The token's rights claim is not an object.")
        }
        var read = Libraries.empty
        var write = Libraries.empty
        var admin = false
        for (name, value) in members {
            switch name {
            case "read": read = try Self.libraries(value, name)
            case "write": write = try Self.libraries(value, name)
            case "admin":
                guard case .bool(let flag) = value else {
                    throw TokenRefusal(.badClaims, "The token's rights claim: admin is not true or false.")
                }
                admin = flag
            default:
                throw TokenRefusal(
                    .badClaims, "The token's rights claim has \(name.prefix(40)); it takes read, write and admin.")
            }
        }
        self.init(read: read, write: write, admin: admin)
    }

    private static func libraries(_ value: JSONValue, _ name: String) throws(TokenRefusal) -> Libraries {
        guard case .array(let items) = value, items.count <= maxListed else {
            throw TokenRefusal(
                .badClaims, "The token's rights claim: \(name) is not a list of library ids (at most \(maxListed)).")
        }
        var ids: Set<String> = []
        for item in items {
            guard case .string(let text) = item else {
                throw TokenRefusal(
                    .badClaims, "The token's rights claim: \(name) lists something that is not a string.")
            }
            if text == "*" { return .all }
            guard let id = Identifier.canonical(text) else {
                throw TokenRefusal(
                    .badClaims,
                    "The token's rights claim: \(name) lists \"\(text.prefix(40))\", which is not a library id.")
            }
            ids.insert(id)
        }
        return .some(ids)
    }
}
