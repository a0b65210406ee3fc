import Foundation
import LibraryClient
import Observation
import PostgreSQL
import TestSupport
import Testing

/// `library-server` in a child process, as users run it; on PostgreSQL when the suite runs with
/// `LIBRARY_TEST_ENGINE=postgres` and `LIBRARY_TEST_POSTGRES` (scripts/postgres-tests.sh), in a
/// schema of its own.
final class ServerProcess {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("library-server")

    let database: String
    private let schema: (base: String, name: String)?
    private var process: Process?
    private(set) var port = 0
    private let arguments: [String]

    init(_ arguments: [String] = []) throws {
        let environment = ProcessInfo.processInfo.environment
        if environment["LIBRARY_TEST_ENGINE"] == "postgres", let base = environment["LIBRARY_TEST_POSTGRES"] {
            let name = "c_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try PGConnection(base).execute("CREATE SCHEMA \(name)")
            schema = (base, name)
            database = base + (base.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(name)"
        } else {
            schema = nil
            database = NSTemporaryDirectory() + "client-\(UUID().uuidString).sqlite"
        }
        self.arguments = arguments
        try start()
    }

    deinit {
        stop()
        if let schema { _ = try? PGConnection(schema.base).execute("DROP SCHEMA \(schema.name) CASCADE") }
        if schema == nil {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        }
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts the server (again on the same port, after a `stop`).
    func start() throws {
        let arguments = ["--port", String(port), "--database", database, "--log-level", "error"]
        let launched = try launchServer(
            Self.binary, arguments + ["--allowed-hosts", "127.0.0.1,localhost,test"] + self.arguments)
        process = launched.process
        port = launched.port
    }

    /// Sends `signal` to the server (SIGHUP rereads its `--jwt-keys`).
    func send(_ signal: Int32) {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, signal)
    }

    /// SIGTERM, and waits for the exit.
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }
}

/// A view as SwiftUI runs one: `body` under `withObservationTracking`, run again (once) after any
/// change of what it read. Counts its renders.
@MainActor
final class RenderedView<Value> {
    private let body: () -> Value
    private(set) var renders = 0
    private(set) var value: Value
    private(set) var history: [Value] = []

    init(_ body: @escaping () -> Value) {
        self.body = body
        value = body()
        renders = 0
        render()
    }

    private func render() {
        renders += 1
        value = withObservationTracking(body) { [weak self] in
            Task { @MainActor in self?.render() }
        }
        history.append(value)
    }
}

/// Waits (polling on the main actor) until `condition` holds; false after `timeout`.
@MainActor
func eventually(_ timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

/// Plain REST calls for setting up and changing data beside the client under test.
struct REST {
    let port: Int

    @discardableResult
    func call(_ method: String, _ path: String, _ body: String? = nil, headers: [String: String] = [:]) throws
        -> TestResponse
    {
        try TestConnection(port: port).request(method, path, headers: headers, body: body)
    }

    func createLibrary(_ name: String = "Central") throws -> UUID {
        try #require(
            UUID(uuidString: try call("POST", "/libraries", #"{"name":"\#(name)"}"#).json["id"] as? String ?? ""))
    }

    func createBook(_ library: UUID, _ title: String, author: String = "") throws -> UUID {
        let body = #"{"title":"\#(title)","author":"\#(author)"}"#
        let answer = try call("POST", "/libraries/\(library.uuidString.lowercased())/books", body)
        return try #require(UUID(uuidString: answer.json["id"] as? String ?? ""))
    }

    func patchBook(_ id: UUID, _ body: String) throws {
        let answer = try call("PATCH", "/books/\(id.uuidString.lowercased())", body)
        guard answer.status == 200 else { throw TestError("PATCH answered \(answer.status)") }
    }
}

/// The error a call throws, or nil when it succeeds.
@MainActor
func failure<T>(_ body: () async throws -> T) async -> LibraryClientError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error as? LibraryClientError ?? .transport("not a LibraryClientError: \(error)")
    }
}
