import Foundation
import LibraryModel

/// A Swift type a field's value is read as and written from.
public protocol FieldConvertible: Sendable {
    init?(fieldValue: FieldValue)
    var fieldValue: FieldValue { get }
    /// What a field shows before its value has arrived.
    static var placeholder: Self { get }
}

extension String: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        guard case .string(let text) = fieldValue else { return nil }
        self = text
    }
    public var fieldValue: FieldValue { .string(self) }
    public static var placeholder: String { "" }
}

extension Int: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        guard case .int(let number) = fieldValue else { return nil }
        self = number
    }
    public var fieldValue: FieldValue { .int(self) }
    public static var placeholder: Int { 0 }
}

extension Bool: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        guard case .bool(let flag) = fieldValue else { return nil }
        self = flag
    }
    public var fieldValue: FieldValue { .bool(self) }
    public static var placeholder: Bool { false }
}

extension UUID: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        guard case .string(let text) = fieldValue, let id = UUID(uuidString: text) else { return nil }
        self = id
    }
    public var fieldValue: FieldValue { .string(uuidString.lowercased()) }
    public static var placeholder: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
}

extension Date: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        guard case .string(let text) = fieldValue, let date = Self.parse(text) else { return nil }
        self = date
    }
    public var fieldValue: FieldValue { .string(Self.format(self)) }
    public static var placeholder: Date { Date(timeIntervalSince1970: 0) }

    /// RFC 3339 UTC with milliseconds, as the server writes timestamps.
    static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

    static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

extension Optional: FieldConvertible where Wrapped: FieldConvertible {
    public init?(fieldValue: FieldValue) {
        if case .null = fieldValue {
            self = .none
        } else if let wrapped = Wrapped(fieldValue: fieldValue) {
            self = .some(wrapped)
        } else {
            return nil
        }
    }
    public var fieldValue: FieldValue { map(\.fieldValue) ?? .null }
    public static var placeholder: Wrapped? { nil }
}

extension FieldValue: FieldConvertible {
    public init?(fieldValue: FieldValue) { self = fieldValue }
    public var fieldValue: FieldValue { self }
    public static var placeholder: FieldValue { .null }
}
