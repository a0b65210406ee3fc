import Foundation
import LibraryClient
import Synchronization
import TestSupport
import Testing

/// The client with a token provider, against a server that takes signed tokens (`--jwt-keys`,
/// no leeway): the provider is asked again after a `401`, the open stream is handed a new token
/// before its own expires, and a stream that expires anyway comes back with a new token and
/// resumes. Tokens live a few seconds: the waits below follow them.
@MainActor
@Suite(.serialized) struct TokenProviderTests {
    nonisolated static let secret = "a secret of at least thirty-two bytes"
    let server: ServerProcess
    let admin: LibraryClient
    let keys: String

    init() throws {
        keys = NSTemporaryDirectory() + "keys-\(UUID().uuidString).json"
        try TokenMinter.keySet([(.hs256(secret: Self.secret), "k")]).write(
            toFile: keys, atomically: true, encoding: .utf8)
        server = try ServerProcess(["--jwt-keys", keys, "--jwt-leeway", "0", "--api-token", "admin-token"])
        admin = LibraryClient(baseURL: server.url, apiToken: "admin-token")
    }

    /// A token for `sub` that reads every library, expiring in `seconds`.
    nonisolated static func token(_ sub: String = "reader-1", expiresIn seconds: Int) -> String {
        TokenMinter.token(
            .hs256(secret: secret), kid: "k", sub: sub, exp: Int(Date().timeIntervalSince1970) + seconds,
            more: #""libraries":{"read":["*"]}"#)
    }

    /// A provider that counts its calls and answers the first with `first` (if given).
    final class Provider: Sendable {
        let calls = Atomic(0)
        let first: String?
        let lifetime: Int
        init(first: String? = nil, lifetime: Int) {
            self.first = first
            self.lifetime = lifetime
        }
        var provide: @Sendable () async throws -> String {
            { [self] in
                let call = calls.add(1, ordering: .relaxed).newValue
                if call == 1, let first { return first }
                return TokenProviderTests.token(expiresIn: lifetime)
            }
        }
    }

    @Test func `a 401 asks the provider once more, and the open stream is handed new tokens before they expire`()
        async throws
    {
        let library = try await admin.createLibrary { $0.name = "Central" }
        // The first token has expired already: the server answers 401, and the client asks again.
        // Tokens of 15 s (14 to 15: `exp` is in whole seconds), refreshed about 5 s ahead (a third
        // of their life). A CI run's sanitizer pass, with every suite in parallel on two cores,
        // once took more than the 2 s that tokens of 6 s left, and the stream expired.
        let provider = Provider(first: Self.token(expiresIn: -10), lifetime: 15)
        let client = LibraryClient(baseURL: server.url, tokenProvider: provider.provide)
        client.tokenRefreshLead = .seconds(6)
        let model = try await client.library(id: library.id)
        #expect(provider.calls.load(ordering: .relaxed) == 2)
        let view = RenderedView { model.name }
        #expect(await client.settled())
        #expect(view.value == "Central")
        // Past the first stream token's expiry: the stream was extended, not replaced.
        let opened = ContinuousClock.now
        #expect(await eventually(.seconds(20)) { client.tokensRefreshed >= 1 })
        try await Task.sleep(until: opened + .seconds(15.5))
        try await admin.update(library) { $0.name = "Central II" }
        #expect(await eventually { view.value == "Central II" })
        #expect(client.streamsOpened == 1, "the stream was replaced instead of extended")
        #expect(provider.calls.load(ordering: .relaxed) >= 3)
        client.close()
    }

    @Test func `a stream whose token expires comes back with a new one and loses no change`() async throws {
        let library = try await admin.createLibrary { $0.name = "Eastside" }
        let book = try await admin.createBook {
            $0.libraryId = library.id
            $0.title = "Emma"
        }
        let provider = Provider(lifetime: 2)
        let client = LibraryClient(baseURL: server.url, tokenProvider: provider.provide)
        client.tokenRefreshLead = .zero  // never ahead: the server ends the stream with `expired`
        let model = try await client.book(id: book.id)
        let view = RenderedView { model.title }
        #expect(await client.settled())
        var titles = ["Emma"]
        // Write through the expiry and the reconnection: every title shows, the last one stays.
        // An expiry is not a failure: the client never shows offline (a failure backs off first).
        var wentOffline = false
        let deadline = ContinuousClock.now + .seconds(4)
        while ContinuousClock.now < deadline {
            let title = "Emma \(titles.count)"
            try await admin.update(book) { $0.title = title }
            titles.append(title)
            try await Task.sleep(for: .milliseconds(100))
            if case .offline = client.connection { wentOffline = true }
        }
        #expect(!wentOffline)
        #expect(await eventually { view.value == titles.last })
        #expect(client.streamsOpened >= 2, "the stream did not expire")
        #expect(provider.calls.load(ordering: .relaxed) >= 2)
        #expect(!model.isDeleted)
        client.close()
    }

    @Test func `a stream refused with 401 as it opens asks for a new token at once, with no backoff`() async throws {
        let library = try await admin.createLibrary { $0.name = "Northside" }
        let secret = Mutex(Self.secret)
        let calls = Atomic(0)
        let client = LibraryClient(
            baseURL: server.url,
            tokenProvider: {
                calls.add(1, ordering: .relaxed)
                return TokenMinter.token(
                    .hs256(secret: secret.withLock { $0 }), kid: "k", sub: "reader-1",
                    exp: Int(Date().timeIntervalSince1970) + 600, more: #""libraries":{"read":["*"]}"#)
            })
        let model = try await client.library(id: library.id)
        #expect(calls.load(ordering: .relaxed) == 1)
        // The server's key changes under the held token (a rotation), before any stream opens.
        let rotated = "another secret of at least thirty-two bytes"
        try TokenMinter.keySet([(.hs256(secret: rotated), "k")]).write(toFile: keys, atomically: true, encoding: .utf8)
        server.send(SIGHUP)
        secret.withLock { $0 = rotated }
        try await Task.sleep(for: .milliseconds(500))  // the server rereads its keys on its own thread
        let view = RenderedView { model.name }
        var wentOffline = false
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline, !(client.connection == .live && client.streamsOpened >= 1) {
            if case .offline = client.connection { wentOffline = true }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!wentOffline, "a refused token backed off as a failure would")
        #expect(client.connection == .live)
        #expect(calls.load(ordering: .relaxed) == 2, "the refused token was not replaced")
        try await admin.update(library) { $0.name = "Northside II" }
        #expect(await eventually { view.value == "Northside II" })
        client.close()
    }
}
