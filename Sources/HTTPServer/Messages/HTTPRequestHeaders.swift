/// The header fields of a request, kept as slices of one byte buffer, with case-insensitive lookup.
///
/// A request head is parsed without building a string per field: the head's bytes are copied once
/// into `storage`, names are lowercased there in place, and an index of where each name and value
/// lies follows them in the same buffer. One allocation holds every field; a lookup compares bytes
/// in place, and only a value someone asks for as a `String` becomes one.
package struct HTTPRequestHeaders: Sendable, Equatable {
    /// The head's bytes (names lowercased), then one `Record` per field.
    private var storage: [UInt8]
    /// Where the records start in `storage`.
    private var recordsStart: Int
    /// How many fields there are.
    package private(set) var count = 0

    /// Where a field's name and value lie in `storage`: four little-endian `UInt32`s.
    private static let recordSize = 16

    /// Request headers from name and value pairs, names lowercased like the parser's.
    package init(_ fields: [(name: String, value: String)] = []) {
        storage = []
        recordsStart = 0
        for (name, value) in fields {
            storage.append(contentsOf: name.utf8)
            storage.append(contentsOf: value.utf8)
        }
        recordsStart = storage.count
        var position = 0
        for (name, value) in fields {
            let nameEnd = position + name.utf8.count
            let valueEnd = nameEnd + value.utf8.count
            append(name: position..<nameEnd, value: nameEnd..<valueEnd)
            position = valueEnd
        }
    }

    /// Storage for the fields of `head`, with room for the records of `capacity` fields; the
    /// parser then `append`s each field it finds, by its position in `head`.
    init(head: ArraySlice<UInt8>, capacity: Int) {
        storage = [UInt8](unsafeUninitializedCapacity: head.count + capacity * Self.recordSize) { buffer, count in
            count = head.withUnsafeBufferPointer { buffer.initialize(fromContentsOf: $0) }
        }
        recordsStart = head.count
    }

    /// Adds a field whose name and value lie at these offsets of the head (or of `init`'s pairs).
    mutating func append(name: Range<Int>, value: Range<Int>) {
        var index = name.lowerBound
        while index < name.upperBound {
            storage[index] = asciiLowercase(storage[index])
            index += 1
        }
        appendBound(name.lowerBound)
        appendBound(name.upperBound)
        appendBound(value.lowerBound)
        appendBound(value.upperBound)
        count += 1
    }

    private mutating func appendBound(_ bound: Int) {
        let value = UInt32(truncatingIfNeeded: bound)
        storage.append(UInt8(truncatingIfNeeded: value))
        storage.append(UInt8(truncatingIfNeeded: value >> 8))
        storage.append(UInt8(truncatingIfNeeded: value >> 16))
        storage.append(UInt8(truncatingIfNeeded: value >> 24))
    }

    /// The lowercased name of field `index`, in the storage.
    func name(at index: Int) -> ArraySlice<UInt8> {
        let (start, end) = (bound(index, 0), bound(index, 1))
        return storage[start..<end]
    }

    /// The value of field `index`, without surrounding whitespace, in the storage.
    func value(at index: Int) -> ArraySlice<UInt8> {
        let (start, end) = (bound(index, 2), bound(index, 3))
        return storage[start..<end]
    }

    private func bound(_ index: Int, _ which: Int) -> Int {
        let offset = recordsStart + index * Self.recordSize + which * 4
        return Int(storage[offset]) | Int(storage[offset + 1]) << 8 | Int(storage[offset + 2]) << 16
            | Int(storage[offset + 3]) << 24
    }

    /// Whether field `index` is called `name` (compared ignoring ASCII case).
    func hasName(_ index: Int, _ name: String) -> Bool {
        self.name(at: index).equalsIgnoringCase(name)
    }

    private func firstIndex(of name: String) -> Int? {
        var index = 0
        while index < count {
            if hasName(index, name) { return index }
            index += 1
        }
        return nil
    }

    /// Whether a field called `name` is present.
    package func contains(_ name: String) -> Bool {
        firstIndex(of: name) != nil
    }

    /// The first value of `name`, if present.
    package subscript(_ name: String) -> String? {
        firstIndex(of: name).map { String(decoding: value(at: $0), as: UTF8.self) }
    }

    /// Every value of `name`, in order.
    package func values(_ name: String) -> [String] {
        (0..<count).filter { hasName($0, name) }.map { String(decoding: value(at: $0), as: UTF8.self) }
    }

    /// Every field as strings, in order: for descriptions and tests, not for the request path.
    package var fields: [(name: String, value: String)] {
        (0..<count).map {
            (String(decoding: name(at: $0), as: UTF8.self), String(decoding: value(at: $0), as: UTF8.self))
        }
    }

    package static func == (lhs: HTTPRequestHeaders, rhs: HTTPRequestHeaders) -> Bool {
        lhs.count == rhs.count
            && (0..<lhs.count).allSatisfy {
                lhs.name(at: $0).elementsEqual(rhs.name(at: $0)) && lhs.value(at: $0).elementsEqual(rhs.value(at: $0))
            }
    }
}
