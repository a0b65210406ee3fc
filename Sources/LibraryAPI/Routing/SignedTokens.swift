import APICore
import AccessTokens
import Glibc
import LibraryDomain
import Synchronization

/// The signed tokens the server takes (`--jwt-keys`): who a token names and what its rights claim
/// grants, each distinct token verified once and kept until it expires (`TokenCache`), so a
/// client sending the same token with every request pays for its signature once.
///
/// The keys can be replaced while the server runs (SIGHUP rereads the key file): the verifier and
/// the cache are swapped together, so no token verified by a dropped key is answered from the
/// cache afterwards.
package final class SignedTokens: Sendable {
    /// The verifier and the tokens it verified, swapped together, under one lock: a request whose
    /// token was verified before takes the lock once, for a lookup.
    private struct State: Sendable {
        var verifier: TokenVerifier
        var cache = TokenCache<Principal>()
        /// Counts key replacements: a token verified by keys replaced meanwhile is not kept.
        var generation = 0
    }

    private let state: Mutex<State>
    /// The claim that holds the rights (`--jwt-claim`).
    package let claim: String
    /// The current second since 1970, by which tokens are judged (and streams end: `EventStreams`).
    package let clock: @Sendable () -> Int
    private let refusals = Mutex<[TokenRefusal.Reason: Int]>([:])

    /// `clock`: the current second since 1970 (tests move it).
    package init(
        verifier: TokenVerifier,
        claim: String = "libraries",
        clock: @escaping @Sendable () -> Int = { Int(time(nil)) }
    ) {
        self.state = Mutex(State(verifier: verifier))
        self.claim = claim
        self.clock = clock
    }

    /// The verifier in use.
    package var verifier: TokenVerifier { state.withLock { $0.verifier } }

    /// Verifies with `keySet` from now on, with the same audience, issuer and leeway.
    package func replaceKeys(_ keySet: JSONWebKeySet) {
        state.withLock { state in
            let old = state.verifier
            state.verifier = TokenVerifier(
                keys: keySet, audience: old.audience, issuer: old.issuer, leeway: old.leeway)
            state.cache = TokenCache()
            state.generation += 1
        }
    }

    /// The principal `token` names, with the rights of its claim; a refusal says which rule it broke.
    ///
    /// `keep`: whether to keep it once verified. A request sent again and again with one token
    /// keeps it; a stream's opening does not: a stream verifies its token once for its whole
    /// life, and 18,000 subscribers each with a token of its own would otherwise fill the cache
    /// with tokens that are never sent again (0.3 KiB a subscriber).
    func principal(_ token: String, keep: Bool = true) throws(TokenRefusal) -> Principal {
        let now = clock()
        if let known = state.withLock({ $0.cache.lookup(token, now: now) }) { return known }
        let (verifier, generation) = state.withLock { ($0.verifier, $0.generation) }
        do {
            let verified = try verifier.verify(token.utf8, now: now)
            let rights = try AccessRights(claim: verified.claim(claim))
            let principal = Principal(
                subject: verified.subject, rights: rights, expires: verified.expires + verifier.leeway)
            if keep {
                state.withLock { state in
                    guard state.generation == generation else { return }
                    state.cache.insert(token, principal, until: verified.expires + verifier.leeway, now: now)
                }
            }
            return principal
        } catch {
            refusals.withLock { $0[error.reason, default: 0] += 1 }
            throw error
        }
    }

    /// Tokens refused since start, by reason, every reason listed.
    package var refusalCounts: [(String, Int)] {
        let counts = refusals.withLock { $0 }
        return TokenRefusal.Reason.allCases.map { ($0.rawValue, counts[$0] ?? 0) }
    }

    /// Distinct tokens verified and kept now.
    package var cachedTokens: Int { state.withLock { $0.cache.count } }
}
