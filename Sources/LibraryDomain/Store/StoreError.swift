/// Why a store operation failed, in terms the API maps to a status.
package struct StoreError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        /// No such library or book (404).
        case notFound
        /// The principal may read the resource but not make this change (403); the text says
        /// which right it lacks.
        case forbidden(String)
        /// `If-Match` did not match the current version (412).
        case preconditionFailed
        /// The request's values are unacceptable (422), field by field.
        case invalid([FieldError])
        /// The database cannot be used now: busy, read-only, full or failing (503).
        case unavailable
        /// The server holds as many of something as it will (503 until some go); the text says
        /// what, for the client.
        case atCapacity(String)
        /// Anything else: a bug or a corrupt database (500).
        case `internal`
    }

    package let kind: Kind
    /// For logs only: may name SQL, never shown to clients.
    package let detail: String

    package init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    package var description: String { "\(kind): \(detail)" }
}
