/// The condition a write's `If-Match` header sets on the current version.
package enum Precondition: Sendable, Equatable {
    /// No `If-Match`: always write.
    case none
    /// `If-Match: *`: the resource must exist.
    case exists
    /// The current version must be one of these.
    case versions([Int])

    /// Whether a resource at `version` may be written.
    package func allows(_ version: Int) -> Bool {
        switch self {
        case .none, .exists: true
        case .versions(let versions): versions.contains(version)
        }
    }
}
