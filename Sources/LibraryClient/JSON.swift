import JSON
import LibraryModel

/// The client reads answers and events with the server's own parser (`JSONParser`: strict, so a
/// number is never a Bool, and invalid UTF-8 or a name given twice is refused) and writes request
/// bodies with its writer: one JSON reader and one JSON value in the package.
extension JSONValue {
    init(_ value: FieldValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .int(let number): self = .number(String(number))
        case .bool(let flag): self = .bool(flag)
        case .null: self = .null
        }
    }

    /// An object of `members`, written in the order of their names.
    init(object members: [String: JSONValue]) {
        self = .object(members.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) })
    }

    /// The field value this JSON stands for; nil for arrays, objects and numbers that are not
    /// whole, which no field holds.
    var fieldValue: FieldValue? {
        switch self {
        case .null: .null
        case .bool(let flag): .bool(flag)
        case .number: integer.map(FieldValue.int)
        case .string(let text): .string(text)
        case .array, .object: nil
        }
    }

    static func decode(_ bytes: some Collection<UInt8>) throws -> JSONValue {
        try JSONParser.parse(Array(bytes))
    }

    var encoded: [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.bytes
    }
}
