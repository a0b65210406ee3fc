// The PostgreSQL comparator for Benchmarks/postgres.py: GET and PATCH /books/{id} on Hummingbird 2
// with PostgresNIO, written the way their documentation teaches: a `PostgresClient` (a connection
// pool) run as a service beside the `Application`, a `Router` with a controller, `Codable`
// response types, errors that render themselves, and queries written with `PostgresQuery`'s
// string interpolation (every interpolated value is a bind parameter).
//
//   hummingbird-postgres --database postgres://USER@HOST:PORT/DB [--port 8081] [--pool N]
//
// The schema is library-server's (Migrations/postgres): start library-server once on the database
// first, it creates it. Trust authentication, no TLS. `--pool` sets the client's
// maximumConnections (PostgresNIO's default, 20, when absent).
//
// Prints `listening on http://127.0.0.1:PORT` once it serves, like library-server.

import Foundation
import Hummingbird
import Logging
import PostgresNIO

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("hummingbird-postgres: \(message)\n".utf8))
    exit(64)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else {
        fail("usage: hummingbird-postgres --database postgres://USER@HOST:PORT/DB [--port P] [--pool N]")
    }
    options[String(name.dropFirst(2))] = value
}
guard let uri = options["database"] else { fail("--database is required") }
guard let url = URL(string: uri), url.scheme == "postgres" || url.scheme == "postgresql", let host = url.host,
    let username = url.user
else { fail("--database must be postgres://USER@HOST:PORT/DB, not \(uri)") }
let databaseName = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path

var configuration = PostgresClient.Configuration(
    host: host, port: url.port ?? 5432, username: username, password: url.password,
    database: databaseName.isEmpty ? nil : databaseName, tls: .disable
)
if let pool = options["pool"].flatMap(Int.init) { configuration.options.maximumConnections = pool }
var logger = Logger(label: "hummingbird-postgres")
logger.logLevel = .warning
let client = PostgresClient(configuration: configuration, backgroundLogger: logger)

let router = Router()
BookController(client: client).addRoutes(to: router)

var app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: Int(options["port"] ?? "8081") ?? 8081)),
    onServerRunning: { channel in
        FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n".utf8))
    },
    logger: logger
)
app.addServices(client)
try await app.runService()
