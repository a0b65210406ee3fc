/// A value bound to a statement parameter.
package enum SQLiteValue: Sendable, Equatable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case null

    /// An integer value.
    package static func int(_ value: Int) -> SQLiteValue { .integer(Int64(value)) }

    /// A text value, or NULL for nil.
    package static func optional(_ value: String?) -> SQLiteValue { value.map(SQLiteValue.text) ?? .null }

    /// An integer value, or NULL for nil.
    package static func optional(_ value: Int?) -> SQLiteValue { value.map(SQLiteValue.int) ?? .null }

    /// A boolean as 0 or 1.
    package static func bool(_ value: Bool) -> SQLiteValue { .integer(value ? 1 : 0) }
}

extension SQLiteValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral {
    package init(stringLiteral value: String) { self = .text(value) }
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(nilLiteral: ()) { self = .null }
}
