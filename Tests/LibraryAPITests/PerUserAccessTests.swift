import AccessTokens
import Crypto
import Foundation
import LibraryAPI
import Synchronization
import TestSupport
import Testing

/// Signed tokens with per-library rights on every REST route: a library the principal cannot read
/// is answered as one that does not exist; a write it may not make is a 403; a token that does
/// not verify is a 401 that names the rule it broke. On every engine (LiveServer).
@Suite struct PerUserAccessTests {
    static let now = 1_800_000_000
    static let adminToken = "static-admin-token"
    static let readToken = "static-read-token"

    static func seed(_ tag: UInt8) -> [UInt8] { (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ tag) | 3 } }
    // Made on each use from fixed bytes: LeakSanitizer reports key material a global holds.
    static var ec: TokenMinter.Signer { .es256(try! P256.Signing.PrivateKey(rawRepresentation: seed(1))) }
    static var secret: TokenMinter.Signer {
        .hs256(SymmetricKey(data: Array("thirty-two bytes of shared secret!!".utf8)))
    }
    static var stranger: TokenMinter.Signer { .es256(try! P256.Signing.PrivateKey(rawRepresentation: seed(9))) }

    /// A server taking ES256 tokens (kid "e") and HS256 ones (kid "s") for audience "library",
    /// with a clock the test moves, and three libraries made with the static admin token:
    /// Central and Eastside with a book each, and Hidden.
    /// The seconds since 1970 the server's token checks see.
    final class Clock: Sendable {
        let seconds = Atomic<Int>(PerUserAccessTests.now)
        func set(_ value: Int) { seconds.store(value, ordering: .relaxed) }
    }

    final class World {
        let clock = Clock()
        let tokens: SignedTokens
        let live: LiveServer
        let central: String
        let eastside: String
        let hidden: String
        let centralBook: String
        let eastsideBook: String

        init() throws {
            let keys = try JSONWebKeySet(
                parsing: Array(
                    TokenMinter.keySet([(PerUserAccessTests.ec, "e"), (PerUserAccessTests.secret, "s")]).utf8))
            let clock = self.clock
            tokens = SignedTokens(
                verifier: TokenVerifier(keys: keys, audience: "library", leeway: 30),
                clock: { clock.seconds.load(ordering: .relaxed) })
            let server = try LiveServer(
                token: PerUserAccessTests.adminToken, readToken: PerUserAccessTests.readToken, signedTokens: tokens)
            live = server
            let admin = ["Authorization": "Bearer \(PerUserAccessTests.adminToken)"]
            func make(_ path: String, _ body: String) throws -> String {
                let response = try server.request("POST", path, headers: admin, body: body)
                guard response.status == 201, let id = response.json["id"] as? String else {
                    throw TestError("setup: \(response.status) \(response.text)")
                }
                return id
            }
            central = try make("/libraries", #"{"name":"Central"}"#)
            eastside = try make("/libraries", #"{"name":"Eastside"}"#)
            hidden = try make("/libraries", #"{"name":"Hidden"}"#)
            centralBook = try make("/books", #"{"libraryId":"\#(central)","title":"Dune"}"#)
            eastsideBook = try make("/books", #"{"libraryId":"\#(eastside)","title":"Emma"}"#)
        }

        /// An ES256 token for `sub` with `rights` (the `libraries` claim's JSON), good for an hour.
        func token(
            _ sub: String, _ rights: String, signer: TokenMinter.Signer = PerUserAccessTests.ec, kid: String = "e",
            exp: Int? = nil, audience: String = "library"
        ) -> String {
            TokenMinter.token(
                signer, kid: kid, sub: sub, exp: exp ?? PerUserAccessTests.now + 3600,
                more: #""aud":"\#(audience)","libraries":\#(rights)"#)
        }

        var reader: String { token("reader-1", #"{"read":["\#(central)"]}"#) }
        var librarian: String { token("librarian-1", #"{"write":["\#(central)"],"read":["\#(eastside)"]}"#) }
        var admin: String { token("admin-1", #"{"admin":true}"#) }

        func call(
            _ method: String, _ path: String, _ token: String?, body: String? = nil, headers: [String: String] = [:]
        )
            throws -> TestResponse
        {
            var headers = headers
            if let token { headers["Authorization"] = "Bearer \(token)" }
            return try live.request(method, path, headers: headers, body: body)
        }

        func ids(_ response: TestResponse) -> Set<String> {
            Set((response.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
        }
    }

    @Test func dataRoutesNeedACredential_OpenRoutesDoNot() throws {
        let world = try World()
        for path in ["/libraries", "/books", "/libraries/\(world.central)", "/books/\(world.centralBook)"] {
            let response = try world.call("GET", path, nil)
            #expect(response.status == 401, "\(path)")
            #expect(response.header("www-authenticate")?.hasPrefix("Bearer") == true)
        }
        for path in ["/healthz", "/openapi.yaml", "/"] {
            #expect(try world.call("GET", path, nil).status == 200, "\(path)")
        }
        // The read token keeps /metrics closed, as it did before signed tokens.
        #expect(try world.call("GET", "/metrics", nil).status == 401)
        #expect(try world.call("GET", "/metrics", Self.readToken).status == 200)
    }

    @Test func tokensThatDoNotVerify_Are401sThatNameTheRule() throws {
        let world = try World()
        let rights = #"{"read":["*"]}"#
        let cases: [(String, String, String)] = [
            ("expired", world.token("r", rights, exp: Self.now - 31), "expired"),
            ("bad signature", world.token("r", rights, signer: Self.stranger), "signature"),
            ("unknown key", world.token("r", rights, kid: "nope"), "key"),
            ("wrong audience", world.token("r", rights, audience: "other"), "aud"),
            (
                "alg none",
                TokenMinter.token(
                    header: #"{"alg":"none","kid":"e"}"#, claims: #"{"sub":"r","exp":\#(Self.now + 60)}"#,
                    signer: Self.ec), "alg"
            ),
            ("not a JWT", "abc.def", "JWT"),
        ]
        for (name, token, word) in cases {
            let response = try world.call("GET", "/libraries", token)
            #expect(response.status == 401, "\(name)")
            #expect(response.header("www-authenticate")?.contains(#"error="invalid_token""#) == true, "\(name)")
            #expect(response.header("content-type") == "application/problem+json", "\(name)")
            let detail = response.json["detail"] as? String ?? ""
            #expect(detail.localizedCaseInsensitiveContains(word), "\(name): \(detail)")
            #expect(!response.text.contains(token.prefix(16)), "\(name): the token is echoed")
        }
        let metrics = try world.call("GET", "/metrics", Self.readToken).text
        #expect(metrics.contains(#"library_token_refusals_total{reason="expired"} 1"#))
        #expect(metrics.contains(#"library_token_refusals_total{reason="bad_signature"} 1"#))
        #expect(metrics.contains(#"library_token_refusals_total{reason="unknown_key"} 1"#))
    }

    @Test func aReader_SeesOnlyItsLibrary_AndTheRestAsIfItDidNotExist() throws {
        let world = try World()
        let reader = world.reader
        #expect(world.ids(try world.call("GET", "/libraries", reader)) == [world.central])
        #expect(world.ids(try world.call("GET", "/books", reader)) == [world.centralBook])
        #expect(try world.call("GET", "/libraries/\(world.central)", reader).status == 200)
        #expect(try world.call("GET", "/books/\(world.centralBook)", reader).status == 200)
        #expect(world.ids(try world.call("GET", "/libraries/\(world.central)/books", reader)) == [world.centralBook])

        // Unreadable and missing answer alike, the id aside.
        let missingLibrary = "00000000-0000-4000-8000-000000000000"
        for (unreadable, missing) in [
            ("/libraries/\(world.eastside)", "/libraries/\(missingLibrary)"),
            ("/books/\(world.eastsideBook)", "/books/\(missingLibrary)"),
            ("/libraries/\(world.eastside)/books", "/libraries/\(missingLibrary)/books"),
            ("/books?libraryId=\(world.eastside)", "/books?libraryId=\(missingLibrary)"),
        ] {
            let hidden = try world.call("GET", unreadable, reader)
            let absent = try world.call("GET", missing, reader)
            #expect(hidden.status == 404, "\(unreadable)")
            #expect(absent.status == 404, "\(missing)")
            #expect(
                hidden.text.replacingOccurrences(of: world.eastside, with: "ID")
                    .replacingOccurrences(of: world.eastsideBook, with: "ID")
                    == absent.text.replacingOccurrences(of: missingLibrary, with: "ID"), "\(unreadable)")
            #expect(hidden.header("etag") == nil)
        }
        // Reading is not writing: a readable library's book is a 403, an unreadable one's a 404.
        let patch = #"{"title":"Changed"}"#
        let forbidden = try world.call("PATCH", "/books/\(world.centralBook)", reader, body: patch)
        #expect(forbidden.status == 403)
        #expect(forbidden.header("content-type") == "application/problem+json")
        #expect(try world.call("PATCH", "/books/\(world.eastsideBook)", reader, body: patch).status == 404)
        #expect(try world.call("DELETE", "/books/\(world.eastsideBook)", reader).status == 404)
        #expect(try world.call("POST", "/libraries", reader, body: #"{"name":"Mine"}"#).status == 403)
        #expect(try world.call("PATCH", "/libraries/\(world.central)", reader, body: #"{"name":"X"}"#).status == 403)
        // Nothing changed.
        let book = try world.call("GET", "/books/\(world.centralBook)", Self.readToken)
        #expect(book.json["title"] as? String == "Dune")
        #expect(book.json["version"] as? Int == 1)
    }

    @Test func aLibrarian_WritesItsLibrary_AndMovesBooksOnlyBetweenLibrariesItWrites() throws {
        let world = try World()
        let librarian = world.librarian
        let renamed = try world.call(
            "PATCH", "/books/\(world.centralBook)", librarian, body: #"{"title":"Dune Messiah"}"#)
        #expect(renamed.status == 200)
        #expect(
            try world.call("PATCH", "/libraries/\(world.central)", librarian, body: #"{"name":"Main"}"#).status == 200)
        let created = try world.call(
            "POST", "/libraries/\(world.central)/books", librarian, body: #"{"title":"Children of Dune"}"#)
        #expect(created.status == 201)
        // Eastside: readable, not writable.
        #expect(world.ids(try world.call("GET", "/libraries", librarian)) == [world.central, world.eastside])
        #expect(
            try world.call("PATCH", "/books/\(world.eastsideBook)", librarian, body: #"{"title":"X"}"#).status == 403)
        #expect(
            try world.call("POST", "/libraries/\(world.eastside)/books", librarian, body: #"{"title":"X"}"#).status
                == 403)
        #expect(
            try world.call("POST", "/libraries/\(world.hidden)/books", librarian, body: #"{"title":"X"}"#).status == 404
        )
        // A move needs write on both ends; an unreadable target is refused as a missing one.
        let toEastside = try world.call(
            "PATCH", "/books/\(world.centralBook)", librarian, body: #"{"libraryId":"\#(world.eastside)"}"#)
        #expect(toEastside.status == 403)
        let toHidden = try world.call(
            "PATCH", "/books/\(world.centralBook)", librarian, body: #"{"libraryId":"\#(world.hidden)"}"#)
        let toMissing = try world.call(
            "PATCH", "/books/\(world.centralBook)", librarian,
            body: #"{"libraryId":"00000000-0000-4000-8000-000000000000"}"#)
        #expect(toHidden.status == 422)
        #expect(toHidden.text == toMissing.text)
        // Creating and deleting libraries is the admin's.
        #expect(try world.call("DELETE", "/libraries/\(world.central)", librarian).status == 403)
        #expect(try world.call("POST", "/libraries", librarian, body: #"{"name":"Mine"}"#).status == 403)
        let made = try world.call("POST", "/libraries", world.admin, body: #"{"name":"New"}"#)
        #expect(made.status == 201)
        #expect(try world.call("DELETE", "/libraries/\(world.hidden)", world.admin).status == 204)
        // What the refusals left: the book is still in Central, Hidden is gone.
        let book = try world.call("GET", "/books/\(world.centralBook)", Self.readToken)
        #expect(book.json["libraryId"] as? String == world.central)
        #expect(book.json["title"] as? String == "Dune Messiah")
        #expect(try world.call("GET", "/libraries/\(world.hidden)", Self.readToken).status == 404)
    }

    @Test func theStaticTokensKeepTheirRights() throws {
        let world = try World()
        #expect(world.ids(try world.call("GET", "/libraries", Self.readToken)).count == 3)
        #expect(
            try world.call("PATCH", "/books/\(world.eastsideBook)", Self.readToken, body: #"{"title":"X"}"#).status
                == 401)
        #expect(
            try world.call("PATCH", "/books/\(world.eastsideBook)", Self.adminToken, body: #"{"title":"X"}"#).status
                == 200)
    }

    @Test func idempotencyKeys_ArePerPrincipal() throws {
        let world = try World()
        let first = world.token("librarian-1", #"{"write":["\#(world.central)"]}"#)
        let second = world.token("librarian-2", #"{"write":["\#(world.central)"]}"#)
        let body = #"{"libraryId":"\#(world.central)","title":"Once"}"#
        let key = ["Idempotency-Key": "shared-key-1"]
        let a = try world.call("POST", "/books", first, body: body, headers: key)
        let retry = try world.call("POST", "/books", first, body: body, headers: key)
        let b = try world.call("POST", "/books", second, body: body, headers: key)
        #expect(a.status == 201 && retry.status == 201 && b.status == 201)
        #expect(a.json["id"] as? String == retry.json["id"] as? String)
        #expect(a.json["id"] as? String != b.json["id"] as? String, "another principal got the first one's answer")
    }

    @Test func aTokenStopsAtItsExpiry_WithTheLeeway() throws {
        let world = try World()
        let token = world.token("reader-1", #"{"read":["*"]}"#, exp: Self.now + 60)
        #expect(try world.call("GET", "/libraries", token).status == 200)
        world.clock.set(Self.now + 60 + 29)
        #expect(try world.call("GET", "/libraries", token).status == 200, "within the leeway")
        world.clock.set(Self.now + 60 + 30)
        let expired = try world.call("GET", "/libraries", token)
        #expect(expired.status == 401, "a cached token outlived its expiry")
        #expect((expired.json["detail"] as? String)?.contains("expired") == true)
    }

    @Test func replacedKeys_StopTokensOfTheDroppedKey_EvenOnesVerifiedBefore() throws {
        let world = try World()
        let token = world.reader
        #expect(try world.call("GET", "/libraries", token).status == 200)
        world.tokens.replaceKeys(
            try JSONWebKeySet(parsing: Array(TokenMinter.keySet([(Self.secret, "s")]).utf8)))
        #expect(try world.call("GET", "/libraries", token).status == 401)
        let hs = world.token("reader-2", #"{"read":["*"]}"#, signer: Self.secret, kid: "s")
        #expect(try world.call("GET", "/libraries", hs).status == 200)
    }

    /// A browser's `EventSource` cannot send headers: a stream takes its token in the URL, with
    /// the same rights; no other route does.
    @Test func streams_TakeTheTokenInTheURL_OtherRoutesDoNot() throws {
        let world = try World()
        let stream = try world.live.events("/books/\(world.centralBook)/events?access_token=\(world.reader)")
        #expect(try stream.next()?.event == "snapshot")
        let hidden = try world.live.events("/books/\(world.eastsideBook)/events?access_token=\(world.reader)")
        #expect(hidden.head.status == 404)
        #expect(try world.call("GET", "/books/\(world.centralBook)?access_token=\(world.reader)", nil).status == 401)
    }
}
