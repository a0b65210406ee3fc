import Crypto
import Foundation
import TestSupport
import Testing

/// The built binary as operators run it: graceful shutdown, request logs, metrics.
@Suite struct ServerProcessTests {
    /// `library-server` running in a child process on a free port.
    final class ServerProcess {
        let process: Process
        let port: Int
        private let errors = Pipe()

        init(_ arguments: [String]) throws {
            // TestConnection sends `Host: test`.
            (process, port) = try launchServer(
                CommandLineTests.binary, ["--port", "0", "--allowed-hosts", "test"] + arguments, standardError: errors)
        }

        deinit { if process.isRunning { process.terminate() } }

        /// Sends SIGTERM, waits for the exit and returns the status and everything logged.
        func stop() -> (status: Int32, log: String) {
            process.terminate()
            process.waitUntilExit()
            let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (process.terminationStatus, log)
        }
    }

    @Test func sigterm_FinishesInFlightRequestsEndsStreamsAndCheckpoints() throws {
        try withTemporaryFile { path in
            let server = try ServerProcess(["--database", path, "--log-level", "notice"])
            let created = try TestConnection(port: server.port).request(
                "POST", "/libraries", body: #"{"name":"Before"}"#)
            let library = try #require(created.json["id"] as? String)
            let stream = try EventStreamClient(port: server.port, path: "/libraries/\(library)/events")
            #expect(try stream.next()?.event == "snapshot")

            // A request whose body is still arriving when the signal comes.
            let body = #"{"name":"In flight"}"#
            let inFlight = try TestConnection(port: server.port)
            try inFlight.send(
                "POST /libraries HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n" + body.prefix(5))
            usleep(200_000)
            server.process.terminate()
            usleep(300_000)
            try inFlight.send(String(body.dropFirst(5)))
            let answer = try inFlight.readResponse()
            #expect(answer.status == 201)
            #expect(answer.header("connection") == "close")

            #expect(stream.drain(quiet: 3000).isEmpty)
            #expect(stream.ended, "the event stream ends at shutdown")
            let (status, log) = server.stop()
            #expect(status == 0)
            #expect(log.contains("stopping") && log.contains("stopped"))
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(wal == 0, "the WAL is checkpointed into the database at shutdown")

            let again = try ServerProcess(["--database", path, "--log-level", "warning"])
            let names =
                try TestConnection(port: again.port).request("GET", "/libraries").json["items"] as? [[String: Any]]
            #expect(Set(names?.compactMap { $0["name"] as? String } ?? []) == ["Before", "In flight"])
            #expect(again.stop().status == 0)
        }
    }

    @Test func requestLog_IsOneLinePerRequestWithItsID() throws {
        let server = try ServerProcess(["--database", ":memory:", "--log-level", "info"])
        let missing = "/books/3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b"
        let response = try TestConnection(port: server.port).request(
            "GET", missing, headers: ["X-Request-ID": "trace-42"])
        #expect(response.header("x-request-id") == "trace-42")
        let generated = try TestConnection(port: server.port).request("GET", "/healthz").header("x-request-id")
        let log = server.stop().log
        let lines = log.split(separator: "\n").filter { $0.contains(" request ") }
        #expect(lines.count == 2)
        // Each loop buffers its own lines, so two requests on two loops may be logged in either order.
        let first = try #require(lines.first { $0.contains("request_id=trace-42") })
        for field in ["method=GET", "route=/books/{id}", "status=404", "duration_ms="] {
            #expect(first.contains(field), "\(field) in \(first)")
        }
        #expect(lines.contains { $0.contains("request_id=\(generated ?? "?")") })
        #expect(log.contains("applied migration"), "startup migrations are logged")
    }

    @Test func readToken_NeverShowsInTheLog() throws {
        let server = try ServerProcess(["--database", ":memory:", "--log-level", "trace", "--read-token", "sekrit-r"])
        let library = try #require(
            try TestConnection(port: server.port).request("POST", "/libraries", body: #"{"name":"x"}"#).json["id"]
                as? String)
        let stream = try TestConnection(port: server.port)
        try stream.send("GET /libraries/\(library)/events?access_token=sekrit-r HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try stream.readHead().status == 200)
        let refused = try TestConnection(port: server.port).request("GET", "/libraries?access_token=sekrit-x")
        #expect(refused.status == 401)
        #expect(!refused.text.contains("sekrit"))
        let header = try TestConnection(port: server.port).request(
            "GET", "/libraries", headers: ["Authorization": "Bearer sekrit-y"])
        #expect(header.status == 401)
        #expect(!header.text.contains("sekrit"))
        let log = server.stop().log
        #expect(log.contains(" request "), "requests are logged at this level")
        #expect(!log.contains("sekrit"))
    }

    /// `--jwt-keys`: tokens of the file's keys are taken and their `sub` logged (never the token);
    /// SIGHUP rereads the file, and a file that does not parse keeps the keys in use.
    @Test func jwtKeys_AreRereadOnSIGHUP_AndABadFileKeepsTheOldOnes() throws {
        try withTemporaryFile { path in
            let first = TokenMinter.Signer.hs256(SymmetricKey(data: Array("the first secret, thirty-two bytes".utf8)))
            let second = TokenMinter.Signer.hs256(SymmetricKey(data: Array("the second secret, also 32 bytes!".utf8)))
            try Data(TokenMinter.keySet([(first, "1")]).utf8).write(to: URL(fileURLWithPath: path))
            let server = try ServerProcess(["--database", ":memory:", "--log-level", "info", "--jwt-keys", path])
            let exp = Int(Date().timeIntervalSince1970) + 600
            let rights = #""libraries":{"read":["*"]}"#
            let firstToken = TokenMinter.token(first, kid: "1", sub: "alice", exp: exp, more: rights)
            let secondToken = TokenMinter.token(second, kid: "2", sub: "bob", exp: exp, more: rights)
            func status(_ token: String) throws -> Int {
                try TestConnection(port: server.port).request(
                    "GET", "/libraries", headers: ["Authorization": "Bearer \(token)"]
                ).status
            }
            func afterSIGHUP(_ token: String, becomes expected: Int) throws -> Bool {
                kill(server.process.processIdentifier, SIGHUP)
                for _ in 0..<200 {
                    if try status(token) == expected { return true }
                    usleep(10_000)
                }
                return false
            }
            #expect(try status(firstToken) == 200)
            #expect(try status(secondToken) == 401)
            #expect(try TestConnection(port: server.port).request("GET", "/libraries").status == 401)

            try Data(TokenMinter.keySet([(second, "2")]).utf8).write(to: URL(fileURLWithPath: path))
            #expect(try afterSIGHUP(secondToken, becomes: 200))
            #expect(try status(firstToken) == 401, "a token of a dropped key is still taken")

            try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
            kill(server.process.processIdentifier, SIGHUP)
            usleep(200_000)
            #expect(try status(secondToken) == 200, "a bad file replaced the keys in use")
            let (exitStatus, log) = server.stop()
            #expect(exitStatus == 0)
            #expect(log.contains("sub=alice") && log.contains("sub=bob"))
            #expect(!log.contains(firstToken.prefix(20)) && !log.contains(secondToken.prefix(20)))
            #expect(log.split(separator: "\n").filter { $0.contains("did not parse") }.count == 1, "\(log)")
        }
    }

    @Test func checkHealth_ExitsZeroOnlyWhenTheServerAnswers() throws {
        let server = try ServerProcess(["--database", ":memory:", "--log-level", "warning"])
        let commandLine = CommandLineTests()
        let healthy = try commandLine.run(["--check-health", "--host", "0.0.0.0", "--port", "\(server.port)"])
        #expect(healthy.status == 0)
        #expect(healthy.stderr.isEmpty)
        #expect(server.stop().status == 0)
        let down = try commandLine.run(["--check-health", "--port", "\(server.port)"])
        #expect(down.status == 1)
        #expect(down.stderr.hasPrefix("library-server: health check failed: connect to 127.0.0.1:"))
        #expect(down.stderr.split(separator: "\n").count == 1)
    }

    /// Resident memory split into anonymous and file pages, the heap into in use and free: the
    /// figures a memory question needs, where one RSS number hides which part grew.
    @Test func metrics_SplitMemoryIntoItsKinds() throws {
        let server = try ServerProcess(["--database", ":memory:", "--log-level", "warning"])
        let text = try TestConnection(port: server.port).request("GET", "/metrics").text
        for name in [
            "library_resident_anon_bytes", "library_resident_file_bytes", "library_heap_in_use_bytes",
            "library_heap_free_bytes", "library_heap_trims_total",
        ] {
            let value = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }?.split(separator: " ").last
            #expect(value.flatMap { Int($0) }.map { $0 >= 0 } == true, "\(name)")
        }
        let anon = text.split(separator: "\n").first { $0.hasPrefix("library_resident_anon_bytes ") }
        #expect((anon?.split(separator: " ").last).flatMap { Int($0) } ?? 0 > 0)
        _ = server.stop()
    }

    @Test func logLevelWarning_KeepsRequestsOutOfTheLog() throws {
        let server = try ServerProcess(["--database", ":memory:", "--log-level", "warning"])
        _ = try TestConnection(port: server.port).request("GET", "/healthz")
        #expect(!server.stop().log.contains(" request "))
    }
}
