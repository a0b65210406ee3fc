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

extension AccessRights {
    /// A list of books (or a stream of one) filtered by `library`: a 404 when these rights cannot
    /// read it, worded as for a library that does not exist and decided by the rights alone, so
    /// it says nothing of whether that library exists. `watch`, when given, names the watch of a
    /// multiplexed stream the 404 is about.
    package func checkReadable(filteredBy library: String?, watch: String? = nil) throws(APIError) {
        guard let library, !reads(library) else { return }
        let shown = watch.map { "watch \"\($0.prefix(300))\": " } ?? ""
        throw .notFound("\(shown)No library \(library) exists.")
    }
}
