import Foundation

/// The opaque `cursor` of list pages: base64url of `v1:<seq>`, the position after which the next
/// page starts. Insertion order never changes, so pages stay stable under concurrent inserts.
enum Cursor {
    static func encode(_ seq: Int) -> String {
        Data("v1:\(seq)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The position a cursor names; a 400 when it was not made by `encode`.
    static func decode(_ text: String) throws(APIError) -> Int {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard text.count <= 40, let data = Data(base64Encoded: base64),
            let decoded = String(data: data, encoding: .utf8), decoded.hasPrefix("v1:"),
            let seq = Int(decoded.dropFirst(3)), seq >= 0, String(seq) == decoded.dropFirst(3)
        else { throw .badRequest("cursor is not a cursor this server returned.") }
        return seq
    }
}
