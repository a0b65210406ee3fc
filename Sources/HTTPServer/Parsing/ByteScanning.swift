import Glibc

/// The byte searches and comparisons of the head parser, as plain loops over `ArraySlice<UInt8>`.
///
/// The generic `Sequence` algorithms (`firstIndex(of:)`, `allSatisfy`, `starts(with:)`, `zip`) do
/// the same and are as fast once optimized, but unoptimized builds run them unspecialized, with a
/// heap allocation or two per byte: the allocation test (`RequestHeadAllocationTests`), which runs
/// in debug builds, could then not tell the parser's own allocations from the noise.
extension ArraySlice<UInt8> {
    /// The index of the first `byte`, if any (`memchr`: a request head's fields are found at the
    /// speed of memory, not a compare and a bounds check a byte).
    func index(of byte: UInt8) -> Int? {
        withUnsafeBufferPointer { bytes -> Int? in
            guard let base = bytes.baseAddress, let found = memchr(base, Int32(byte), bytes.count) else { return nil }
            return startIndex + (UnsafeRawPointer(found) - UnsafeRawPointer(base))
        }
    }

    /// How many times `byte` occurs.
    func occurrences(of byte: UInt8) -> Int {
        withUnsafeBufferPointer { bytes -> Int in
            guard var next = bytes.baseAddress.map(UnsafeRawPointer.init) else { return 0 }
            let end = next + bytes.count
            var count = 0
            while next < end, let found = memchr(next, Int32(byte), end - next) {
                count += 1
                next = UnsafeRawPointer(found) + 1
            }
            return count
        }
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

    /// Whether the bytes may be a field value: no control character but tab (RFC 9110 §5.5).
    /// Eight bytes at a time while none of them is below a space or DEL.
    func isFieldValue() -> Bool {
        withUnsafeBufferPointer { bytes -> Bool in
            guard let base = bytes.baseAddress else { return true }
            let raw = UnsafeRawPointer(base)
            var offset = 0
            while offset + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                if !ByteWords.hasByte(below: 0x20, in: word) && !ByteWords.hasByte(0x7F, in: word) {
                    offset += 8
                    continue
                }
                let wordEnd = offset + 8
                while offset < wordEnd {
                    if !isFieldValueByte(bytes[offset]) { return false }
                    offset += 1
                }
            }
            while offset < bytes.count {
                if !isFieldValueByte(bytes[offset]) { return false }
                offset += 1
            }
            return true
        }
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

/// A byte a field value may hold: a tab, a visible character or a space, or obs-text.
func isFieldValueByte(_ byte: UInt8) -> Bool { byte == 9 || (byte >= 32 && byte != 127) }

/// Tests on eight bytes at once, read as one little-endian word (the classic bit tricks: a
/// subtraction borrows into a byte's top bit only where that byte was below the subtrahend).
enum ByteWords {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether some byte of `word` is below `limit` (at most 0x80).
    @inline(__always) static func hasByte(below limit: UInt8, in word: UInt64) -> Bool {
        (word &- ones &* UInt64(limit)) & ~word & highs != 0
    }

    /// Whether some byte of `word` is `byte`.
    @inline(__always) static func hasByte(_ byte: UInt8, in word: UInt64) -> Bool {
        hasByte(below: 1, in: word ^ (ones &* UInt64(byte)))
    }
}

extension Array<UInt8> {
    /// The index of the first byte from `start` that is below 14 (CR, LF or another control
    /// character a head's scan must look at), or `limit`: a head's scan passes over the rest of
    /// its bytes eight at a time.
    func firstControlCharacter(from start: Int, before limit: Int) -> Int {
        withUnsafeBufferPointer { bytes -> Int in
            guard let base = bytes.baseAddress else { return start }
            let raw = UnsafeRawPointer(base)
            var index = start
            while index + 8 <= limit {
                if ByteWords.hasByte(below: 14, in: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { break }
                index += 8
            }
            while index < limit, bytes[index] >= 14 { index += 1 }
            return index
        }
    }
}
