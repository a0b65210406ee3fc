/// The segments of a request path after its first `/`, as routing needs them: how many there
/// are, whether one is empty, and the first three (routes have at most three).
package struct PathSegments {
    private(set) var count = 0
    private(set) var hasEmpty = false
    private(set) var first: Substring = ""
    private(set) var second: Substring = ""
    private(set) var third: Substring = ""

    /// The segments of a path without escapes: slices of it, nothing copied.
    package init(_ path: Substring) {
        Self.forEachSegment(of: path) { record($0) }
    }

    /// The segments of a path with `%` escapes, each decoded; 400 if any escape is malformed.
    package init(decoding path: Substring) throws(APIError) {
        var valid = true
        Self.forEachSegment(of: path) { raw in
            guard let segment = percentDecode(raw) else {
                valid = false
                return
            }
            record(segment[...])
        }
        guard valid else { throw .badRequest("The path has an invalid percent-encoding.") }
    }

    private mutating func record(_ segment: Substring) {
        switch count {
        case 0: first = segment
        case 1: second = segment
        case 2: third = segment
        default: break
        }
        count += 1
        if segment.isEmpty { hasEmpty = true }
    }

    /// Calls `body` with each `/`-separated piece of `path` after the first.
    private static func forEachSegment(of path: Substring, _ body: (Substring) -> Void) {
        let utf8 = path.utf8
        guard var slash = firstIndex(of: UInt8(ascii: "/"), in: utf8, from: utf8.startIndex) else { return }
        while true {
            let start = utf8.index(after: slash)
            let end = firstIndex(of: UInt8(ascii: "/"), in: utf8, from: start) ?? utf8.endIndex
            body(Substring(utf8[start..<end]))
            guard end < utf8.endIndex else { return }
            slash = end
        }
    }

    /// Whether `path` has a `%` escape.
    package static func hasEscape(_ path: Substring) -> Bool {
        firstIndex(of: UInt8(ascii: "%"), in: path.utf8, from: path.utf8.startIndex) != nil
    }

    /// Whether `segment` is `name`, byte for byte.
    package static func matches(_ segment: Substring, _ name: StaticString) -> Bool {
        let utf8 = segment.utf8
        guard utf8.count == name.utf8CodeUnitCount else { return false }
        var index = utf8.startIndex
        var offset = 0
        while index < utf8.endIndex {
            if utf8[index] != name.utf8Start[offset] { return false }
            index = utf8.index(after: index)
            offset += 1
        }
        return true
    }

    /// A plain loop: the generic `firstIndex(of:)` allocates in unoptimized builds (see
    /// `ByteScanning.swift` in HTTPServer).
    private static func firstIndex(
        of byte: UInt8, in utf8: Substring.UTF8View, from start: Substring.UTF8View.Index
    ) -> Substring.UTF8View.Index? {
        var index = start
        while index < utf8.endIndex {
            if utf8[index] == byte { return index }
            index = utf8.index(after: index)
        }
        return nil
    }
}
