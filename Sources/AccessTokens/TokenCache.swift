/// Tokens already verified, so that a client sending one token with every request pays for its
/// signature once: a bounded map from the token's text to what it verified to, each entry good
/// until its token expires (with the verifier's leeway). Refusals are not kept: a bad token costs
/// its checks each time, which end at the first rule it breaks.
///
/// A value, to be kept inside its owner's lock (`SignedTokens`): a lookup is then one lock and
/// one hash of 64 bytes, and a verification runs outside the lock (`lookup`, then `insert`).
package struct TokenCache<Value: Sendable>: Sendable {
    private struct Entry: Sendable {
        let value: Value
        /// The first second at which the token no longer verifies.
        let until: Int
    }

    /// A token as a key: hashed by its last 64 bytes only (a JWT's signature, which differs
    /// whenever anything signed differs), compared whole. A listed-rights token is kilobytes,
    /// and hashing all of it was most of what a cache hit cost; a forged token that copies a good
    /// one's signature hashes alike but is not equal, so it is verified, and refused.
    private struct Key: Hashable, Sendable {
        let token: String

        func hash(into hasher: inout Hasher) {
            let hashed: Void? = token.utf8.withContiguousStorageIfAvailable { bytes in
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(64))))
            }
            if hashed == nil { for byte in token.utf8.suffix(64) { hasher.combine(byte) } }
        }
    }

    private var entries: [Key: Entry] = [:]
    package let capacity: Int

    package init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// What `token` verified to, while it is good.
    package func lookup(_ token: String, now: Int) -> Value? {
        guard let entry = entries[Key(token: token)], now < entry.until else { return nil }
        return entry.value
    }

    /// Keeps what `token` verified to until the second `until`. When full, the expired go first,
    /// then (still full of good tokens) an arbitrary half rather than grow.
    package mutating func insert(_ token: String, _ value: Value, until: Int, now: Int) {
        if entries.count >= capacity {
            entries = entries.filter { now < $0.value.until }
            if entries.count >= capacity {
                entries = Dictionary(uniqueKeysWithValues: entries.prefix(capacity / 2).map { ($0.key, $0.value) })
            }
        }
        entries[Key(token: token)] = Entry(value: value, until: until)
    }

    /// What `token` verified to, from the cache while it is good, else from `verify`, kept until
    /// the second `until` of what it returns.
    package mutating func value(
        for token: String, now: Int, verify: () throws(TokenRefusal) -> (value: Value, until: Int)
    ) throws(TokenRefusal) -> Value {
        if let value = lookup(token, now: now) { return value }
        let (value, until) = try verify()
        insert(token, value, until: until, now: now)
        return value
    }

    /// How many tokens are kept now.
    package var count: Int { entries.count }
}
