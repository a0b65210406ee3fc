import APICore
import LibraryDomain

/// `ETag: "<version>"` and the conditional headers built on it (RFC 9110 §13).
enum EntityTag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// `If-Match` as a store precondition: `*`, or strong tags (weak ones never match).
    ///
    /// Strong comparison is exact text (RFC 9110 §8.8.3.2): only the tags this server sends, the
    /// version in canonical decimal, can match; `"+1"` or `"01"` match no version.
    static func precondition(ifMatch header: String?) throws(APIError) -> Precondition {
        guard let header = try header.map(undoingPercentEncoding) else { return .none }
        if header.trimmedOWS() == "*" { return .exists }
        return .versions(try tags(header).compactMap { $0.weak ? nil : version(of: $0.opaque) })
    }

    /// The version whose tag is exactly `opaque`, or nil when no version has that tag.
    private static func version(of opaque: String) -> Int? {
        guard let version = Int(opaque), String(version) == opaque else { return nil }
        return version
    }

    /// Whether `If-None-Match` matches a resource at `version` (weak comparison), so a GET is a 304.
    static func noneMatchHits(_ header: String?, version: Int) throws(APIError) -> Bool {
        try noneMatchHits(header, opaque: String(version))
    }

    /// Whether `If-None-Match` matches the tag whose quoted text is `opaque` (weak comparison).
    static func noneMatchHits(_ header: String?, opaque: String) throws(APIError) -> Bool {
        guard let header = try header.map(undoingPercentEncoding) else { return false }
        if header.trimmedOWS() == "*" { return true }
        return try tags(header).contains { $0.opaque == opaque }
    }

    /// The header as sent, or decoded when it was percent-encoded as a whole (`%221%22` for `"1"`).
    ///
    /// Apple's swift-openapi-runtime percent-encodes header values (swift-openapi-generator #529,
    /// #857), so every conditional request of a generated client arrives that way. A valid list of
    /// entity tags never starts with `%` (it starts with `"`, `W/`, `*`, a comma or whitespace),
    /// so decoding such a value changes nothing that works today.
    private static func undoingPercentEncoding(_ header: String) throws(APIError) -> String {
        guard header.utf8.first == UInt8(ascii: "%") else { return header }
        guard let decoded = percentDecode(header[...]) else {
            throw .badRequest("If-Match and If-None-Match take entity tags such as \"3\", or *.")
        }
        return decoded
    }

    /// The entity tags of a list: `#entity-tag`, where `entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE`,
    /// `etagc = %x21 / %x23-7E / obs-text`. A comma inside the quotes belongs to the tag; empty list
    /// elements are allowed, as in every HTTP list (RFC 9110 §5.6.1).
    private static func tags(_ header: String) throws(APIError) -> [(weak: Bool, opaque: String)] {
        let malformed = APIError.badRequest("If-Match and If-None-Match take entity tags such as \"3\", or *.")
        let bytes = Array(header.utf8)
        var result: [(Bool, String)] = []
        var index = 0
        func skipWhitespace() { while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 } }
        while true {
            skipWhitespace()
            guard index < bytes.count else { break }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            var weak = false
            if bytes[index...].starts(with: "W/".utf8) {
                weak = true
                index += 2
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw malformed }
            index += 1
            let start = index
            while index < bytes.count,
                bytes[index] == 0x21 || (0x23...0x7E).contains(bytes[index]) || bytes[index] >= 0x80
            {
                index += 1
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw malformed }
            result.append((weak, String(decoding: bytes[start..<index], as: UTF8.self)))
            index += 1
            skipWhitespace()
            guard index == bytes.count || bytes[index] == UInt8(ascii: ",") else { throw malformed }
        }
        guard !result.isEmpty else { throw malformed }
        return result
    }
}
