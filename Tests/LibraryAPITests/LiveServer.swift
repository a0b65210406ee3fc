import EventStreams
import Foundation
import HTTPServer
import LibraryAPI
import LibraryDomain
import LibraryMemoryStore
import LibraryStorage
import LiveEngine
import Logging
import PostgreSQL
import TestSupport

/// The real API on 127.0.0.1 and a free port, over a fresh store.
///
/// The API suite runs on both engines: with `LIBRARY_TEST_ENGINE=postgres` and
/// `LIBRARY_TEST_POSTGRES=<URI>` (scripts/postgres-tests.sh), every server not given a SQLite
/// file runs on PostgreSQL instead, in a schema of its own that `stop` drops. With
/// `LIBRARY_TEST_FEED=log` as well, the live engine hears every commit from the change log; with
/// `LIBRARY_TEST_FEED=notify`, from its notification (the rows it carries, else the log), as a
/// replica hears the others' writes. With `LIBRARY_TEST_POOLED=1`, the store is opened as behind
/// a pooler in transaction mode (a `listenURI`): unnamed statements, no session state. With
/// `LIBRARY_TEST_ENGINE=memory`, they run on the in-memory store (`MemoryLibraryStore`), which
/// has nothing of SQL: the suite then checks that the API needs nothing but the store seam.
final class LiveServer {
    let store: any LibraryDatabase
    /// The PostgreSQL schema of this server, when it runs on PostgreSQL.
    private let schema: (base: String, name: String)?
    let hub: LiveHub
    let server: HTTPServer
    let port: Int
    private var stopped = false

    init(
        path: String = ":memory:",
        token: String? = nil,
        readToken: String? = nil,
        signedTokens: SignedTokens? = nil,
        cors: String? = nil,
        allowedHosts: [String]? = nil,
        busyTimeoutMilliseconds: Int32 = 5_000,
        history: Int = 10_000,
        heartbeatInterval: Double = 15,
        inboxCapacity: Int = 4_096,
        maxWindows: Int = LiveHub.defaultMaxWindows,
        largeLoads: LiveHub.LargeLoads? = nil,
        largeDrops: LiveHub.LargeDrops? = nil
    ) throws {
        let environment = ProcessInfo.processInfo.environment
        if path == ":memory:", environment["LIBRARY_TEST_ENGINE"] == "postgres",
            let base = environment["LIBRARY_TEST_POSTGRES"]
        {
            let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try PGConnection(base).execute("CREATE SCHEMA \(name)")
            schema = (base, name)
            let separator = base.contains("?") ? "&" : "?"
            let uri = base + separator + "options=-csearch_path%3D\(name)"
            store = try PostgresLibraryStore(
                uri: uri, listenURI: environment["LIBRARY_TEST_POOLED"] == "1" ? uri : nil, readers: 4,
                history: history,
                ownCommits: ["log": .readFromLog, "notify": .notified][environment["LIBRARY_TEST_FEED"] ?? ""]
                    ?? .handedOver)
        } else if path == ":memory:", environment["LIBRARY_TEST_ENGINE"] == "memory" {
            schema = nil
            store = MemoryLibraryStore(history: history)
        } else {
            schema = nil
            store = try SQLiteLibraryStore(
                path: path, lanes: 2, busyTimeoutMilliseconds: busyTimeoutMilliseconds, history: history)
        }
        hub = LiveHub.start(
            store: store, heartbeatInterval: heartbeatInterval, inboxCapacity: inboxCapacity, maxWindows: maxWindows,
            observers: LiveHub.Observers(wire: EventStreams.wire, largeLoads: largeLoads, largeDrops: largeDrops))
        let api = LibraryAPI(
            store: store,
            hub: hub,
            configuration: APIConfiguration(
                apiToken: token, readToken: readToken, signedTokens: signedTokens, corsOrigin: cors,
                allowedHosts: AllowedHosts(allowedHosts)),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        )
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.loopCount = 2
        server = HTTPServer(configuration: configuration, responder: api)
        api.reportMetrics(of: server)
        port = try server.start()
    }

    deinit { stop() }

    func connect() throws -> TestConnection { try TestConnection(port: port) }

    /// Opens an event stream.
    func events(_ path: String, headers: [String: String] = [:]) throws -> EventStreamClient {
        try EventStreamClient(port: port, path: path, headers: headers)
    }

    /// Live subscribers now.
    var subscribers: Int { hub.counters.subscribers.load(ordering: .relaxed) }

    /// Live subscribers once they number `expected`, or after `seconds`: a stream's end reaches
    /// its client before the live engine, on its own thread, counts the subscriber out.
    func subscribers(settlingAt expected: Int, within seconds: Double = 2) -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while subscribers != expected, Date() < deadline { usleep(10_000) }
        return subscribers
    }

    /// One request on a new connection.
    func request(
        _ method: String,
        _ path: String,
        headers: [String: String] = [:],
        body: String? = nil
    ) throws -> TestResponse {
        try connect().request(method, path, headers: headers, body: body)
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        server.shutdown(grace: 2)
        store.close()
        if let schema {
            _ = try? PGConnection(schema.base).executeScript(
                "SET client_min_messages = warning; DROP SCHEMA \(schema.name) CASCADE")
        }
    }

    /// Creates a library and returns its id.
    func createLibrary(_ name: String = "Central") throws -> String {
        let response = try request("POST", "/libraries", body: #"{"name":"\#(name)"}"#)
        guard response.status == 201, let id = response.json["id"] as? String else {
            throw TestError("could not create a library: \(response.status) \(response.text)")
        }
        return id
    }

    /// Creates a book in `library` and returns its id.
    func createBook(in library: String, title: String = "Dune", extra: String = "") throws -> String {
        let response = try request("POST", "/books", body: #"{"libraryId":"\#(library)","title":"\#(title)"\#(extra)}"#)
        guard response.status == 201, let id = response.json["id"] as? String else {
            throw TestError("could not create a book: \(response.status) \(response.text)")
        }
        return id
    }
}
