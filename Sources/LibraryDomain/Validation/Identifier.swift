import Foundation

/// Resource ids: lowercase UUID text.
package enum Identifier {
    /// A new random id.
    package static func make() -> String { UUID().uuidString.lowercased() }

    /// The canonical (lowercase) form of `text` if it is a UUID, else nil.
    package static func canonical(_ text: some StringProtocol) -> String? {
        guard text.utf8.count == 36, let uuid = UUID(uuidString: String(text)) else { return nil }
        return uuid.uuidString.lowercased()
    }

    /// Whether `text` is a UUID.
    package static func isValid(_ text: String) -> Bool { canonical(text) != nil }
}
