import Foundation
import TestSupport
import Testing

/// The built `library-server` binary, run as a user would: flags, env vars, the ready line, exits.
@Suite struct CommandLineTests {
    /// The executable sits next to the test bundle in the build directory.
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("library-server")

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs the binary to completion (it must exit by itself within 10 s).
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = arguments
        process.environment = environment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus,
            stdout: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        )
    }

    @Test func badFlags_AreOneLineAndANonZeroExit() throws {
        for arguments in [["--port", "70000"], ["--bogus"], ["--log-level", "loud"], ["--port"]] {
            let result = try run(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        let fromEnvironment = try run([], environment: ["LIBRARY_PORT": "abc"])
        #expect(fromEnvironment.status != 0)
        #expect(fromEnvironment.stderr.contains("LIBRARY_PORT"))
    }

    @Test(arguments: ["0", "-1", "3601", "soon"])
    func heartbeatOutsideItsRange_IsRefusedSayingTheRange(value: String) throws {
        let result = try run(["--port", "0", "--database", ":memory:", "--heartbeat-interval", value])
        #expect(result.status != 0)
        #expect(result.stderr.contains("above 0, at most 3600"), "\(result.stderr)")
    }

    @Test func `a listen database is refused unless both URIs are PostgreSQL's`() throws {
        let refused: [([String], String)] = [
            (["--database", ":memory:", "--listen-database", "postgres://u@127.0.0.1:9/db"], "needs --database"),
            (["--database", "postgres://u@127.0.0.1:9/db", "--listen-database", "./x.sqlite"], "postgres://"),
        ]
        for (arguments, reason) in refused {
            let result = try run(["--port", "0"] + arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(reason), "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test func emptyOrSharedTokens_AreRefusedWithOneLine() throws {
        let refused: [([String], [String: String])] = [
            ([], ["LIBRARY_API_TOKEN": ""]), (["--api-token="], [:]), (["--api-token", ""], [:]),
            ([], ["LIBRARY_READ_TOKEN": ""]), (["--read-token="], [:]), (["--allowed-hosts", " , "], [:]),
            (["--api-token", "same", "--read-token", "same"], [:]),
            (["--read-token", "same"], ["LIBRARY_API_TOKEN": "same"]),
        ]
        for (arguments, environment) in refused {
            let result = try run(["--port", "0", "--database", ":memory:"] + arguments, environment: environment)
            #expect(result.status != 0, "\(arguments) \(environment)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments) \(environment): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test func badKeyFilesAndJWTFlags_AreOneLineAndANonZeroExit() throws {
        try withTemporaryFile { path in
            try Data(#"{"keys":[{"kty":"oct","k":"c2hvcnQ"}]}"#.utf8).write(to: URL(fileURLWithPath: path))
            let refused: [[String]] = [
                ["--jwt-keys", "/nonexistent/keys.json"], ["--jwt-keys", path], ["--jwt-audience", "library"],
                ["--jwt-leeway", "3601"], ["--jwt-claim="],
            ]
            for arguments in refused {
                let result = try run(["--port", "0", "--database", ":memory:"] + arguments)
                #expect(result.status != 0, "\(arguments)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            }
        }
    }

    @Test func unopenableDatabase_IsOneLineAndANonZeroExit() throws {
        try withTemporaryFile { path in
            try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
            let notADatabase = try run(["--port", "0", "--database", path])
            #expect(notADatabase.status != 0)
            #expect(notADatabase.stderr.split(separator: "\n").count == 1, "\(notADatabase.stderr)")
            let missingDirectory = try run(["--port", "0", "--database", "/nonexistent/dir/x.sqlite"])
            #expect(missingDirectory.status != 0)
            #expect(missingDirectory.stderr.contains("cannot open database"))
        }
    }

    @Test func help_ListsEveryFlagWithItsVariable() throws {
        let result = try run(["--help"])
        #expect(result.status == 0)
        for variable in [
            "LIBRARY_HOST", "LIBRARY_PORT", "LIBRARY_DATABASE", "LIBRARY_API_TOKEN", "LIBRARY_LOG_LEVEL",
            "LIBRARY_CORS_ORIGIN", "LIBRARY_MAX_CONNECTIONS", "LIBRARY_HEARTBEAT_INTERVAL", "LIBRARY_HISTORY",
            "LIBRARY_READ_TOKEN", "LIBRARY_ALLOWED_HOSTS", "LIBRARY_JWT_KEYS", "LIBRARY_JWT_AUDIENCE",
            "LIBRARY_JWT_ISSUER", "LIBRARY_JWT_LEEWAY", "LIBRARY_JWT_CLAIM",
        ] {
            #expect(result.stdout.contains(variable), "\(variable)")
        }
    }

    @Test func server_PrintsOneReadyLineAndExitsZeroOnSIGTERM() throws {
        let process = Process()
        process.executableURL = Self.binary
        // The flag wins over its environment variable.
        process.arguments = ["--port", "0", "--database", ":memory:"]
        process.environment = ["LIBRARY_PORT": "1", "LIBRARY_LOG_LEVEL": "warning"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = Pipe()
        try process.run()
        var line = ""
        let handle = out.fileHandleForReading
        while !line.hasSuffix("\n") {
            let byte = handle.readData(ofLength: 1)
            guard !byte.isEmpty else { break }
            line += String(decoding: byte, as: UTF8.self)
        }
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))
        let port = try #require(
            Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        #expect(port > 1)
        #expect(try TestConnection(port: port).request("GET", "/books").status == 421, "Host: test is not allowed")
        for (host, status) in [("127.0.0.1:\(port)", 200), ("localhost", 200), ("[::1]:1", 200), ("evil.example", 421)]
        {
            let connection = try TestConnection(port: port)
            try connection.send("GET /books HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            #expect(try connection.readResponse().status == status, "Host: \(host)")
        }
        process.terminate()  // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(handle.readDataToEndOfFile().isEmpty, "exactly one line on stdout")
    }
}
