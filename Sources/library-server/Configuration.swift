import Logging

/// The command line and environment, read once at start.
///
/// Every flag has a `LIBRARY_…` environment variable; a flag wins over its variable, a variable
/// over the default. A bad value is one line on stderr and a non-zero exit.
struct Configuration: Sendable {
    var host = "127.0.0.1"
    var port = 8080
    var database = "./library.sqlite"
    /// A direct PostgreSQL URI for the change feed and migrations; set when `database` leads
    /// through a pooler in transaction mode.
    var listenDatabase: String?
    var apiToken: String?
    var readToken: String?
    /// A JWK set file: signed tokens with per-library rights are taken when set.
    var jwtKeys: String?
    var jwtAudience: String?
    var jwtIssuer: String?
    var jwtLeeway = 30
    var jwtClaim = "libraries"
    /// Host names a request may name in `Host`; nil takes the default for `host`.
    var allowedHosts: [String]?
    var logLevel = Logger.Level.info
    var corsOrigin: String?
    var consoleDirectory: String?
    var maxConnections = 19_000
    var heartbeatInterval = 15.0
    var history = 10_000
    var showHelp = false
    /// Probe a running server's /healthz instead of serving (the container's HEALTHCHECK).
    var checkHealth = false

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct Option: Sendable {
        let flag: String
        let variable: String
        let placeholder: String
        let help: String
        let defaultText: String
        let apply: @Sendable (inout Configuration, String) throws -> Void
    }

    private static let options: [Option] = [
        Option(
            flag: "--host", variable: "LIBRARY_HOST", placeholder: "H", help: "address to listen on",
            defaultText: "127.0.0.1"
        ) {
            $0.host = $1
        },
        Option(
            flag: "--port", variable: "LIBRARY_PORT", placeholder: "P", help: "port to listen on; 0 picks a free one",
            defaultText: "8080"
        ) {
            $0.port = try integer($1, "--port", 0...65535)
        },
        Option(
            flag: "--database", variable: "LIBRARY_DATABASE", placeholder: "PATH|URI",
            help:
                "SQLite file, created if missing (:memory: keeps nothing on disk), or a PostgreSQL URI "
                + "postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?PARAMS] shared by replicas",
            defaultText: "./library.sqlite"
        ) { $0.database = $1 },
        Option(
            flag: "--listen-database", variable: "LIBRARY_LISTEN_DATABASE", placeholder: "URI",
            help:
                "a direct PostgreSQL URI (no pooler) to the --database's database, for LISTEN and migrations; "
                + "set it when --database goes through a pooler in transaction mode, which then sees no session state",
            defaultText: "--database"
        ) { $0.listenDatabase = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--api-token", variable: "LIBRARY_API_TOKEN", placeholder: "T",
            help: "require Authorization: Bearer T on every write", defaultText: "none: writes are open"
        ) { $0.apiToken = try token($1, "--api-token") },
        Option(
            flag: "--read-token", variable: "LIBRARY_READ_TOKEN", placeholder: "T",
            help: "require Authorization: Bearer T (or the API token) on reads, streams and /metrics",
            defaultText: "none: reads are open"
        ) { $0.readToken = try token($1, "--read-token") },
        Option(
            flag: "--jwt-keys", variable: "LIBRARY_JWT_KEYS", placeholder: "FILE",
            help:
                "take signed tokens (JWT) verified with the keys of this JWK set (oct/HS256, EC P-256/ES256, "
                + "OKP Ed25519/EdDSA); every data route then needs a credential; SIGHUP rereads the file",
            defaultText: "none: only the static tokens"
        ) { $0.jwtKeys = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--jwt-audience", variable: "LIBRARY_JWT_AUDIENCE", placeholder: "AUD",
            help: "a signed token's aud must name AUD", defaultText: "not checked"
        ) { $0.jwtAudience = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--jwt-issuer", variable: "LIBRARY_JWT_ISSUER", placeholder: "ISS",
            help: "a signed token's iss must be ISS", defaultText: "not checked"
        ) { $0.jwtIssuer = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--jwt-leeway", variable: "LIBRARY_JWT_LEEWAY", placeholder: "S",
            help: "seconds of clock skew allowed on a signed token's exp and nbf", defaultText: "30"
        ) { $0.jwtLeeway = try integer($1, "--jwt-leeway", 0...3600) },
        Option(
            flag: "--jwt-claim", variable: "LIBRARY_JWT_CLAIM", placeholder: "NAME",
            help: #"the claim holding a signed token's rights: {"read":[ids],"write":[ids],"admin":bool}, "*" for all"#,
            defaultText: "libraries"
        ) { (configuration: inout Configuration, text: String) throws in
            guard !text.isEmpty, text.utf8.count <= 128 else {
                throw Failure(description: "--jwt-claim must be a claim name of 1 to 128 bytes")
            }
            configuration.jwtClaim = text
        },
        Option(
            flag: "--allowed-hosts", variable: "LIBRARY_ALLOWED_HOSTS", placeholder: "NAMES",
            help: "host names requests may carry in Host, comma-separated (any port), or *",
            defaultText: "the listen address, plus localhost, 127.0.0.1 and [::1] on loopback; any host on 0.0.0.0"
        ) { (configuration: inout Configuration, text: String) throws in
            let names = text.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }.filter { !$0.isEmpty }
            guard !names.isEmpty else {
                throw Failure(description: "--allowed-hosts needs at least one host name, or *")
            }
            configuration.allowedHosts = names
        },
        Option(
            flag: "--log-level", variable: "LIBRARY_LOG_LEVEL", placeholder: "L",
            help: "trace, debug, info (one line per request), notice, warning, error or critical", defaultText: "info"
        ) { (configuration: inout Configuration, text: String) throws in
            guard let level = Logger.Level(rawValue: text.lowercased()) else {
                throw Failure(
                    description:
                        "--log-level must be one of trace, debug, info, notice, warning, error, critical; got \"\(text)\""
                )
            }
            configuration.logLevel = level
        },
        Option(
            flag: "--cors-origin", variable: "LIBRARY_CORS_ORIGIN", placeholder: "O",
            help: "allow browsers on origin O (comma-separated, or *) to call the API", defaultText: "off"
        ) { $0.corsOrigin = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--console-directory", variable: "LIBRARY_CONSOLE_DIRECTORY", placeholder: "DIR",
            help: "serve the console at / from DIR, read on each request (for working on it), not the built-in copy",
            defaultText: "the copy built into the binary"
        ) { $0.consoleDirectory = $1.isEmpty ? nil : $1 },
        Option(
            flag: "--max-connections", variable: "LIBRARY_MAX_CONNECTIONS", placeholder: "N",
            help: "open connections past which new ones get 503", defaultText: "19000"
        ) { $0.maxConnections = try integer($1, "--max-connections", 1...1_000_000) },
        Option(
            flag: "--heartbeat-interval", variable: "LIBRARY_HEARTBEAT_INTERVAL", placeholder: "S",
            help: "seconds between keep-alive comments on event streams", defaultText: "15"
        ) { (configuration: inout Configuration, text: String) throws in
            guard let seconds = Double(text), seconds > 0, seconds <= 3600 else {
                throw Failure(
                    description:
                        "--heartbeat-interval must be a number of seconds above 0, at most 3600; got \"\(text)\"")
            }
            configuration.heartbeatInterval = seconds
        },
        Option(
            flag: "--history", variable: "LIBRARY_HISTORY", placeholder: "N",
            help: "changes kept for resuming event streams", defaultText: "10000"
        ) { $0.history = try integer($1, "--history", 1...100_000_000) },
    ]

    /// Reads `arguments` (without the program name) over `environment`.
    static func parse(arguments: [String], environment: [String: String]) throws(Failure) -> Configuration {
        var configuration = Configuration()
        for option in options {
            if let value = environment[option.variable] {
                do {
                    try option.apply(&configuration, value)
                } catch {
                    throw Failure(description: "\(option.variable): \(error)")
                }
            }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--help" || argument == "-h" {
                configuration.showHelp = true
                continue
            }
            if argument == "--check-health" {
                configuration.checkHealth = true
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let option = options.first(where: { $0.flag == parts[0] }) else {
                throw Failure(description: "unknown option \(argument); see --help")
            }
            let value: String
            if parts.count == 2 {
                value = String(parts[1])
            } else {
                guard index < arguments.count else { throw Failure(description: "\(option.flag) needs a value") }
                value = arguments[index]
                index += 1
            }
            do {
                try option.apply(&configuration, value)
            } catch {
                throw Failure(description: "\(error)")
            }
        }
        if let listen = configuration.listenDatabase, !isPostgres(listen) {
            throw Failure(description: "--listen-database must be a postgres:// or postgresql:// URI")
        }
        if configuration.listenDatabase != nil, !isPostgres(configuration.database) {
            throw Failure(description: "--listen-database needs --database to be a PostgreSQL URI")
        }
        if configuration.jwtKeys == nil,
            configuration.jwtAudience != nil || configuration.jwtIssuer != nil
        {
            throw Failure(description: "--jwt-audience and --jwt-issuer need --jwt-keys")
        }
        // The write token also grants reads: the same text for both would leave reads guarded by
        // the write token, which is almost certainly a mistake in the deployment's secrets.
        if let readToken = configuration.readToken, readToken == configuration.apiToken {
            throw Failure(
                description:
                    "--read-token must differ from --api-token (the API token already grants reads); "
                    + "leave --read-token out to open reads, or give it a token of its own")
        }
        return configuration
    }

    static var usage: String {
        var lines = [
            "usage: library-server [options]",
            "",
            "Serves the library REST API and live updates over HTTP/1.1.",
            "",
            "options (each also read from its environment variable; a flag wins):",
        ]
        for option in options {
            lines.append("  \(option.flag) \(option.placeholder)".padding(to: 28) + option.help)
            lines.append(String(repeating: " ", count: 28) + "env \(option.variable), default \(option.defaultText)")
        }
        lines.append(
            "  --check-health".padding(to: 28)
                + "ask the server on --host/--port for /healthz; exit 0 when it answers 200 (no curl needed)")
        lines.append("  -h, --help".padding(to: 28) + "show this help")
        return lines.joined(separator: "\n")
    }

    private static func isPostgres(_ uri: String) -> Bool {
        uri.hasPrefix("postgres://") || uri.hasPrefix("postgresql://")
    }

    /// A token must not be empty: an empty `LIBRARY_API_TOKEN=` would otherwise turn auth off.
    private static func token(_ text: String, _ flag: String) throws(Failure) -> String {
        guard !text.isEmpty else {
            throw Failure(description: "\(flag) must not be empty; leave it out to run without a token")
        }
        return text
    }

    private static func integer(_ text: String, _ flag: String, _ range: ClosedRange<Int>) throws(Failure) -> Int {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text),
            range.contains(value)
        else {
            throw Failure(
                description:
                    "\(flag) must be a whole number from \(range.lowerBound) to \(range.upperBound); got \"\(text)\"")
        }
        return value
    }
    /// `database` fit for a log line: a PostgreSQL URI's password replaced by `***`.
    static func redactingPassword(_ database: String) -> String {
        guard let scheme = database.range(of: "://"),
            let at = database.range(of: "@", range: scheme.upperBound..<database.endIndex),
            let colon = database.range(of: ":", range: scheme.upperBound..<at.lowerBound)
        else { return database }
        return String(database[..<colon.upperBound]) + "***" + String(database[at.lowerBound...])
    }
}

extension String {
    fileprivate func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }

}
