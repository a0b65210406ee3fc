/// What a principal may do: read libraries (and their books), write them, and, as an admin,
/// create and delete libraries. Write implies read; admin implies both, on every library.
/// `LibraryWriter` enforces it on every write, the API on every read: a library that cannot be
/// read is answered as one that does not exist. Signed tokens carry it in a claim
/// (`AccessTokens`); the static tokens stand for `everything` and `readEverything`.
package struct AccessRights: Sendable, Equatable {
    /// Libraries, by id (canonical UUIDs), or every one.
    package enum Libraries: Sendable, Equatable {
        case all
        case some(Set<String>)

        package func contains(_ library: String) -> Bool {
            switch self {
            case .all: true
            case .some(let ids): ids.contains(library)
            }
        }

        package static let empty = Libraries.some([])

        package func union(_ other: Libraries) -> Libraries {
            switch (self, other) {
            case (.all, _), (_, .all): .all
            case (.some(let a), .some(let b)): .some(a.union(b))
            }
        }
    }

    package let read: Libraries
    package let write: Libraries
    package let admin: Bool

    package init(read: Libraries, write: Libraries, admin: Bool) {
        self.admin = admin
        self.write = admin ? .all : write
        self.read = admin ? .all : read.union(write)
    }

    /// Every right: the API token's.
    package static let everything = AccessRights(read: .all, write: .all, admin: true)
    /// Reading every library: the read token's.
    package static let readEverything = AccessRights(read: .all, write: .empty, admin: false)

    /// Whether the library `id` (and its books) may be read.
    package func reads(_ id: String) -> Bool { read.contains(id) }

    /// Whether the library `id` (and its books) may be changed.
    package func writes(_ id: String) -> Bool { write.contains(id) }

    /// The libraries a list may show: nil when every one.
    package var readable: Set<String>? {
        switch read {
        case .all: nil
        case .some(let ids): ids
        }
    }
}
