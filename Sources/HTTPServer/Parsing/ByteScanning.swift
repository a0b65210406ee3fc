/// The byte searches and comparisons of the head parser, as plain loops over `ArraySlice<UInt8>`.
///
/// The generic `Sequence` algorithms (`firstIndex(of:)`, `allSatisfy`, `starts(with:)`, `zip`) do
/// the same and are as fast once optimized, but unoptimized builds run them unspecialized, with a
/// heap allocation or two per byte: the allocation test (`RequestHeadAllocationTests`), which runs
/// in debug builds, could then not tell the parser's own allocations from the noise.
extension ArraySlice<UInt8> {
    /// The index of the first `byte`, if any.
    func index(of byte: UInt8) -> Int? {
        var index = startIndex
        while index < endIndex {
            if self[index] == byte { return index }
            index += 1
        }
        return nil
    }

    /// How many times `byte` occurs.
    func occurrences(of byte: UInt8) -> Int {
        var count = 0
        var index = startIndex
        while index < endIndex {
            if self[index] == byte { count += 1 }
            index += 1
        }
        return count
    }

    /// Whether every byte passes `test`.
    func all(_ test: (UInt8) -> Bool) -> Bool {
        var index = startIndex
        while index < endIndex {
            if !test(self[index]) { return false }
            index += 1
        }
        return true
    }

    /// Whether the bytes begin with `prefix`.
    func hasPrefix(_ prefix: StaticString) -> Bool {
        let length = prefix.utf8CodeUnitCount
        guard count >= length else { return false }
        var offset = 0
        while offset < length {
            if self[startIndex + offset] != prefix.utf8Start[offset] { return false }
            offset += 1
        }
        return true
    }

    /// Whether the bytes are `text` exactly.
    func equals(_ text: StaticString) -> Bool {
        count == text.utf8CodeUnitCount && hasPrefix(text)
    }

    /// Whether the bytes are `text`, ignoring ASCII case.
    func equalsIgnoringCase(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard count == utf8.count else { return false }
        var index = startIndex
        var other = utf8.startIndex
        while index < endIndex {
            if asciiLowercase(self[index]) != asciiLowercase(utf8[other]) { return false }
            index += 1
            other = utf8.index(after: other)
        }
        return true
    }
}
