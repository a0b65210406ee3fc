/// An ordered list of response header fields with case-insensitive lookup.
///
/// Response headers keep the spelling they were given. A request's fields are `HTTPRequestHeaders`,
/// slices of the head they were parsed from.
package struct HTTPHeaders: Sendable, Equatable, Sequence {
    package private(set) var fields: [(name: String, value: String)]

    package init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    /// The first value of `name`, if present.
    package subscript(_ name: String) -> String? {
        for field in fields where equalsIgnoringCase(field.name, name) { return field.value }
        return nil
    }

    /// Every value of `name`, in order.
    package func values(_ name: String) -> [String] {
        fields.filter { equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// Appends a field, keeping any others of the same name.
    package mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Replaces every field of this name with one.
    package mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name, value))
    }

    /// Removes every field of this name.
    package mutating func remove(_ name: String) {
        fields.removeAll { equalsIgnoringCase($0.name, name) }
    }

    package func makeIterator() -> some IteratorProtocol<(name: String, value: String)> {
        fields.makeIterator()
    }

    package static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

private func equalsIgnoringCase(_ lhs: String, _ rhs: String) -> Bool {
    lhs.utf8.count == rhs.utf8.count
        && zip(lhs.utf8, rhs.utf8).allSatisfy { asciiLowercase($0) == asciiLowercase($1) }
}

@inline(__always)
func asciiLowercase(_ byte: UInt8) -> UInt8 {
    byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
}
