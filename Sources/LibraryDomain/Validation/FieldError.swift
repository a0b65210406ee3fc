/// What is wrong with one field of a request body.
package struct FieldError: Sendable, Equatable {
    /// The field's JSON name (`title`, `publishedYear`).
    package var field: String
    /// A sentence fragment saying what the field must be.
    package var message: String

    package init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
}
