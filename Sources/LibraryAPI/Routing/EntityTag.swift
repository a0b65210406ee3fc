import LibraryDomain

/// `ETag: "<version>"` and the conditional headers built on it (RFC 9110 §13).
enum EntityTag {
    static func header(_ version: Int) -> String { "\"\(version)\"" }

    /// `If-Match` as a store precondition: `*`, or strong tags (weak ones never match).
    static func precondition(ifMatch header: String?) throws(APIError) -> Precondition {
        guard let header else { return .none }
        if header.trimmedOWS() == "*" { return .exists }
        return .versions(try tags(header).compactMap { $0.weak ? nil : Int($0.opaque) })
    }

    /// Whether `If-None-Match` matches a resource at `version` (weak comparison), so a GET is a 304.
    static func noneMatchHits(_ header: String?, version: Int) throws(APIError) -> Bool {
        guard let header else { return false }
        if header.trimmedOWS() == "*" { return true }
        return try tags(header).contains { $0.opaque == String(version) }
    }

    private static func tags(_ header: String) throws(APIError) -> [(weak: Bool, opaque: Substring)] {
        var result: [(Bool, Substring)] = []
        for item in header.split(separator: ",") {
            var tag = item.trimmedOWS()
            let weak = tag.hasPrefix("W/")
            if weak { tag = tag.dropFirst(2) }
            guard tag.count >= 2, tag.first == "\"", tag.last == "\"",
                !tag.dropFirst().dropLast().contains("\"")
            else { throw .badRequest("If-Match and If-None-Match take entity tags such as \"3\", or *.") }
            result.append((weak, tag.dropFirst().dropLast()))
        }
        return result
    }
}
