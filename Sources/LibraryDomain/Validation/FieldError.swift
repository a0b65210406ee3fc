/// What is wrong with one field of a request body.
@usableFromInline package struct FieldError: Sendable, Equatable {
    /// The field's JSON name, as the field table has it (`name`, say).
    package var field: String
    /// A sentence fragment saying what the field must be.
    package var message: String

    /// Text may hold any character but U+0000: PostgreSQL's text cannot store it, and both engines
    /// keep the same rules.
    package static let noNUL = "must not contain the character U+0000"

    package init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
}
