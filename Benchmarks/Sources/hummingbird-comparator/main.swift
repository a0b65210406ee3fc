// The comparator for Benchmarks/run.sh: GET /books/{id}, GET /libraries/{id}/books, POST /books
// and PATCH /books/{id} on Hummingbird 2, written the way its documentation teaches (a Router,
// Codable request and response types, HTTPError), over a database prepared by library-server's
// migrations, with the same SQLite settings.
//
//   hummingbird-comparator --database PATH [--port 8081] [--readers 4] [--plain]
//
// `--plain` serves only GET and PATCH /books/{id}, the way a Hummingbird user would first write
// them (PlainBookController): one statement per request, no read before the update.
//
// Prints `listening on http://127.0.0.1:PORT` once it serves, like library-server.

import Foundation
import Hummingbird

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
var plain = false
while let name = arguments.popFirst() {
    if name == "--plain" {
        plain = true
        continue
    }
    guard name.hasPrefix("--"), let value = arguments.popFirst() else {
        FileHandle.standardError.write(
            Data("usage: hummingbird-comparator --database PATH [--port P] [--readers N] [--plain]\n".utf8))
        exit(64)
    }
    options[String(name.dropFirst(2))] = value
}
guard let path = options["database"] else {
    FileHandle.standardError.write(Data("hummingbird-comparator: --database is required\n".utf8))
    exit(64)
}
let database = try Database(path: path, readerCount: Int(options["readers"] ?? "4") ?? 4)
let router = Router()
if plain {
    PlainBookController(database: database).addRoutes(to: router)
} else {
    BookController(database: database).addRoutes(to: router)
}

let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: Int(options["port"] ?? "8081") ?? 8081)),
    onServerRunning: { channel in
        FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n".utf8))
    }
)
try await app.runService()
