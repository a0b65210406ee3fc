/// A record of a resource, read field by field through the field table: what storage, JSON, events
/// and the live models use, so that none of them names a field.
package protocol FieldRecord: Sendable, Equatable {
    associatedtype Field: ResourceField
    associatedtype Draft: FieldDraft where Draft.Field == Field

    /// Makes a record from each field's value (of the field's kind) and its insertion order.
    init(seq: Int, _ value: (Field) -> FieldValue)

    /// The value of one field.
    subscript(field: Field) -> FieldValue { get }

    /// The public id (the `id` field).
    var id: String { get }

    /// Insertion order, the key lists page by. Not part of the public representation.
    var seq: Int { get }

    /// The writable fields.
    var draft: Draft { get }
}

/// The writable fields of a resource, as a client sends them, read and written field by field.
package protocol FieldDraft: Sendable, Equatable {
    associatedtype Field: ResourceField

    /// Makes a draft from each writable field's value.
    init(_ value: (Field) -> FieldValue)

    /// A writable field's value; setting a field that is not writable, or a value of another kind,
    /// is a programming error.
    subscript(field: Field) -> FieldValue { get set }
}

extension FieldDraft {
    /// A draft made of the table's default values and `values`: nil when a field that has no
    /// default is missing (the caller reports it).
    @inlinable package init?(defaultsAnd values: [Field: FieldValue]) {
        for field in Field.writable where values[field] == nil && field.descriptor.defaultValue == nil {
            return nil
        }
        self.init { values[$0] ?? $0.descriptor.defaultValue! }
    }

    /// Field errors that make this draft unacceptable, by the rules of the field table; empty when
    /// it is valid. Whether a library a book names exists is checked by the store, inside the write.
    @inlinable package func validate() -> [FieldError] {
        Field.writable.flatMap { $0.descriptor.errors(in: self[$0]) }
    }
}

extension FieldDescriptor {
    /// What is wrong with `value` as the value of this row's field (already of the field's kind): its rule, and no
    /// U+0000 in text, which PostgreSQL cannot store.
    @usableFromInline package func errors(in value: FieldValue) -> [FieldError] {
        var errors: [FieldError] = []
        switch (rule, value) {
        case (.length(let bounds), .string(let text)):
            if !bounds.contains(text.unicodeScalars.count) {
                let message =
                    bounds.lowerBound == 0
                    ? "must be at most \(bounds.upperBound) characters long"
                    : "must be \(bounds.lowerBound) to \(bounds.upperBound) characters long"
                errors.append(FieldError(name, message))
            }
        case (.range(let bounds), .int(let number)):
            if !bounds.contains(number) {
                errors.append(FieldError(name, "must be between \(bounds.lowerBound) and \(bounds.upperBound)"))
            }
        case (.uuid, .string(let text)):
            if !Identifier.isValid(text) { errors.append(FieldError(name, "must be a UUID")) }
        case (.isbn, .string(let text)):
            if !ISBN.isValid(text) {
                errors.append(
                    FieldError(name, "must be a valid ISBN-10 or ISBN-13 (hyphens allowed, checksum checked)"))
            }
        case (.length, _), (.range, _), (.uuid, _), (.isbn, _), (nil, _):
            break  // null, where the field may be null, or no rule
        }
        if case .string(let text) = value, text.utf8.contains(0) { errors.append(FieldError(name, FieldError.noNUL)) }
        return errors
    }
}

/// A JSON merge patch (RFC 7396): the writable fields it sets, each with its new value (`.null`
/// clears a nullable one); the others are left alone.
package struct Patch<Field: ResourceField>: Sendable, Equatable {
    package private(set) var values: [Field: FieldValue] = [:]

    @inlinable package init(_ values: [Field: FieldValue] = [:]) {
        self.values = values
    }

    /// The new value of `field`, or nil when the patch leaves it alone.
    @inlinable package subscript(field: Field) -> FieldValue? {
        get { values[field] }
        set { values[field] = newValue }
    }

    /// The fields it sets, in table order.
    @inlinable package var fields: [Field] { values.keys.sorted { $0.rawValue < $1.rawValue } }

    /// `draft` with this patch applied.
    @inlinable package func applied<Draft: FieldDraft>(to draft: Draft) -> Draft where Draft.Field == Field {
        var result = draft
        for (field, value) in values { result[field] = value }
        return result
    }

    /// The field errors of the values this patch sets (the others are stored, hence valid).
    @inlinable package func validate() -> [FieldError] {
        values.sorted { $0.key.rawValue < $1.key.rawValue }.flatMap { $0.key.descriptor.errors(in: $0.value) }
    }
}

package typealias BookPatch = Patch<BookField>
package typealias LibraryPatch = Patch<LibraryField>
