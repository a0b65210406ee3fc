/// A parsed JSON value. Objects keep their members in document order.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text as written, checked against the JSON grammar; converted on demand.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.elementsEqual(b) { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The integer this number denotes, if it is a whole number that fits in an `Int`.
    package var integer: Int? {
        guard case .number(let text) = self else { return nil }
        if let value = Int(text) { return value }
        guard let double = Double(text), double.isFinite, double.rounded() == double, abs(double) < 9e15 else {
            return nil
        }
        return Int(double)
    }

    /// The value of an object's member `key`; nil for anything but an object, or a key it lacks.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    package var string: String? { if case .string(let text) = self { text } else { nil } }
    package var array: [JSONValue]? { if case .array(let items) = self { items } else { nil } }

    /// An object's members by name (the parser refuses a name given twice; were one, the first
    /// would be kept).
    package var members: [String: JSONValue]? {
        guard case .object(let members) = self else { return nil }
        return Dictionary(members, uniquingKeysWith: { first, _ in first })
    }

    /// A short name of the value's type, for error messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
