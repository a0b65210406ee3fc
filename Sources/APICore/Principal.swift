import LibraryDomain

/// Who a request comes from, and what it may do.
package struct Principal: Sendable {
    /// The token's `sub`; nil for the static tokens and for a server that asks for no credential.
    package let subject: String?
    package let rights: AccessRights
    /// The second (since 1970) from which its token no longer verifies (its `exp` and the leeway);
    /// nil: never. A stream it opened ends then (`expired`).
    package let expires: Int?

    package init(subject: String?, rights: AccessRights, expires: Int?) {
        self.subject = subject
        self.rights = rights
        self.expires = expires
    }

    /// A request on a server that asks for no credential, or with the API token: every right.
    package static let everything = Principal(subject: nil, rights: .everything, expires: nil)
    /// The read token: reads every library.
    package static let readEverything = Principal(subject: nil, rights: .readEverything, expires: nil)
    /// A request not admitted (yet): no right at all.
    package static let nobody = Principal(
        subject: nil, rights: AccessRights(read: .empty, write: .empty, admin: false), expires: nil)
}
