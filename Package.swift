// swift-tools-version:6.2

import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode and the upcoming features we opt into.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

// `LIBRARY_FUZZ=1 swift build --product library-fuzz` (scripts/fuzz.sh) instruments the parsers and
// the fuzz target for libFuzzer, with AddressSanitizer. Set through the environment, not -Xswiftc,
// so the build plugin's tool is left alone.
let fuzzing = Context.environment["LIBRARY_FUZZ"] == "1"
let fuzzSettings: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"]), .define("FUZZING")] : []
let fuzzLinkerSettings: [LinkerSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address", "-use-ld=lld"])] : []

let package = Package(
    name: "library-server",
    // Observation, which the client's models are built on, exists from macOS 14 and iOS 17. The
    // server itself runs on Linux (epoll).
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .executable(name: "library-server", targets: ["library-server"]),
        // For apps: live @Observable libraries and books that subscribe to exactly the fields read.
        .library(name: "LibraryClient", targets: ["LibraryClient"]),
        // A library live in the terminal, through the client.
        .executable(name: "library-watch", targets: ["library-watch"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The client's HTTP: streams response bodies on Linux and Apple platforms. Never linked by the server.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // Only for the test of a client generated from openapi.yaml (Tests/LibraryClientTests/GeneratedClient).
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Token signatures (HMAC-SHA256, ECDSA P-256, Ed25519): never written by hand.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        // `swift package generate-documentation`: the client's DocC catalog, built in .ci/run.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // System SQLite through its C API (Debian: libsqlite3-dev).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // System libpq, PostgreSQL's C client (Debian: libpq-dev), for replicas sharing one database.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // epoll and eventfd, which Glibc does not export to Swift.
        .target(name: "CSystemLinux"),

        // SHA-256 (migration checksums, watch tags that must not collide) and strict base64url (watch tags,
        // tokens and keys).
        .target(name: "Digest", swiftSettings: swiftSettings),
        // A small SQLite layer: connection, statement, migrator.
        .target(name: "SQLite", dependencies: ["CSQLite", "Digest"], swiftSettings: swiftSettings),
        // A small PostgreSQL layer over libpq: connection, parameters, results, migrator.
        .target(name: "PostgreSQL", dependencies: ["CLibPQ"], swiftSettings: swiftSettings),
        // HTTP/1.1 on non-blocking sockets and epoll. Knows nothing about books.
        .target(name: "HTTPServer", dependencies: ["CSystemLinux"], swiftSettings: swiftSettings + fuzzSettings),
        // A strict JSON parser and a JSON writer straight into bytes: the API's request and response
        // bodies, and the change feed's notifications. No dependencies.
        .target(name: "JSON", swiftSettings: swiftSettings + fuzzSettings),
        // The field table and field values: the model the server and the client share. No dependencies.
        .target(name: "LibraryModel", swiftSettings: swiftSettings),
        // The one parser of text/event-stream, for the client and the tests. No dependencies.
        .target(name: "ServerSentEvents", swiftSettings: swiftSettings),
        // Records, validation, the change model, the write rules, and the store seam (LibraryDatabase,
        // RecordRows) the API and the live engine see storage through.
        .target(name: "LibraryDomain", dependencies: ["LibraryModel"], swiftSettings: swiftSettings),
        // Libraries and books in SQLite (the embedded default) or PostgreSQL (replicas): migrations,
        // reads, writes, the change log, and the change feed across replicas.
        .target(
            name: "LibraryStorage",
            dependencies: ["JSON", "LibraryDomain", "SQLite", "PostgreSQL", "Digest"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedFiles"]
        ),
        // Libraries and books in this process's memory: the store seam with nothing of SQL, for the API
        // suite (LIBRARY_TEST_ENGINE=memory).
        .target(name: "LibraryMemoryStore", dependencies: ["LibraryDomain"], swiftSettings: swiftSettings),
        // Bearer tokens: JWK sets, JWT verification (HS256, ES256, EdDSA through swift-crypto) and the
        // rights a token's claim grants. The parsing is written here, strict, and fuzzed.
        .target(
            name: "AccessTokens",
            dependencies: ["Digest", "JSON", "LibraryDomain", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings + fuzzSettings),
        // Live updates: @Observable models of watched resources, subscribers, snapshots and replay.
        // Knows the store only through `LiveStore`.
        .target(name: "LiveEngine", dependencies: ["LibraryDomain"], swiftSettings: swiftSettings),
        // What a request says and what a refusal looks like, for the REST routes and the event
        // streams alike: paths (Route), query parameters, field selections, JSON request bodies,
        // problem documents (APIError).
        .target(
            name: "APICore", dependencies: ["Digest", "HTTPServer", "JSON", "LibraryDomain", "LibraryModel"],
            swiftSettings: swiftSettings + fuzzSettings),
        // The live path over HTTP: Server-Sent Events streams of a resource or a collection, many
        // watches on one stream and its side channel, the event encoding and the watch grammar.
        .target(
            name: "EventStreams",
            dependencies: [
                "APICore", "HTTPServer", "JSON", "LibraryDomain", "LiveEngine", "Digest", "ServerSentEvents",
            ],
            swiftSettings: swiftSettings + fuzzSettings),
        // Routes, JSON, problem responses: the REST API over the domain. Hands stream requests to EventStreams.
        .target(
            name: "LibraryAPI",
            dependencies: [
                "AccessTokens", "APICore", "EventStreams", "HTTPServer", "JSON", "LibraryDomain", "LiveEngine",
                "Digest",
                .product(name: "Logging", package: "swift-log"),
            ],
            // The console's files are embedded by the EmbedFiles plugin, not compiled or copied as resources.
            exclude: ["Console"],
            swiftSettings: swiftSettings + fuzzSettings,
            plugins: ["EmbedFiles"]
        ),
        // Configuration and wiring only.
        .executableTarget(
            name: "library-server",
            dependencies: [
                "AccessTokens", "LibraryAPI", "EventStreams", "HTTPServer", "LibraryDomain", "LibraryStorage",
                "LiveEngine", "CSystemLinux",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // The Swift client: @Observable models kept live over one /events stream.
        .target(
            name: "LibraryClient",
            dependencies: [
                "JSON", "LibraryModel", "ServerSentEvents",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "library-watch", dependencies: ["LibraryClient"], swiftSettings: swiftSettings),
        // The guide's BookReader sample ported to the client (the DocC article's code): its views'
        // content on every platform, the SwiftUI views where SwiftUI exists.
        .target(name: "BookReader", dependencies: ["LibraryClient"], swiftSettings: swiftSettings),
        // The guide's claim measured end to end: renders and bytes of a screen of views (Benchmarks/client-renders.sh).
        .executableTarget(
            name: "client-renders",
            dependencies: [
                "LibraryClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/ClientRenders",
            swiftSettings: swiftSettings
        ),

        // The parsers' invariants on arbitrary bytes: run by the fuzz target on every input, and by
        // the tests over the committed corpus. Not part of any product.
        .target(
            name: "FuzzChecks",
            dependencies: [
                "AccessTokens", "APICore", "Digest", "EventStreams", "HTTPServer", "JSON", "LibraryAPI",
                "LibraryDomain",
            ],
            swiftSettings: swiftSettings + fuzzSettings),
        // Fuzz targets for the HTTP parser, the JSON body decoders and the token verifier; scripts/fuzz.sh runs them.
        .executableTarget(
            name: "library-fuzz",
            dependencies: ["FuzzChecks"],
            swiftSettings: swiftSettings + fuzzSettings,
            linkerSettings: fuzzLinkerSettings
        ),

        // Build-time embedding of Migrations/*.sql, openapi.yaml and the console into the binary.
        .executableTarget(name: "EmbedFilesTool", swiftSettings: swiftSettings),
        .plugin(name: "EmbedFiles", capability: .buildTool(), dependencies: ["EmbedFilesTool"]),

        // Raw-socket HTTP client shared by the tests.
        .target(
            name: "TestSupport",
            dependencies: ["Digest", "ServerSentEvents", .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings),
        // A per-thread heap allocation counter (it defines malloc for the whole test executable).
        .target(name: "CAllocationCounter", path: "Tests/CAllocationCounter"),
        .testTarget(name: "SQLiteTests", dependencies: ["SQLite", "Digest"], swiftSettings: swiftSettings),
        // Run against a real server when LIBRARY_TEST_POSTGRES is set (scripts/postgres-tests.sh).
        .testTarget(name: "PostgreSQLTests", dependencies: ["PostgreSQL"], swiftSettings: swiftSettings),
        .testTarget(
            name: "HTTPServerTests", dependencies: ["HTTPServer", "FuzzChecks", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(name: "LibraryDomainTests", dependencies: ["LibraryDomain"], swiftSettings: swiftSettings),
        .testTarget(
            name: "ServerSentEventsTests", dependencies: ["ServerSentEvents"], swiftSettings: swiftSettings),
        // Against the real library-server binary (both engines), through a TCP proxy that counts and cuts.
        .testTarget(
            name: "LibraryClientTests",
            dependencies: [
                "LibraryClient", "LibraryModel", "PostgreSQL", "TestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: ["GeneratedClient/openapi-generator-config.yaml"],
            swiftSettings: swiftSettings
        ),
        // The BookReader sample's views driven through the withObservationTracking render loop.
        .testTarget(
            name: "BookReaderTests", dependencies: ["BookReader", "LibraryClient"], swiftSettings: swiftSettings),
        .testTarget(
            name: "LibraryStorageTests",
            dependencies: ["LibraryStorage", "LibraryDomain", "SQLite", "PostgreSQL"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AccessTokensTests",
            dependencies: [
                "AccessTokens", "Digest", "JSON", "LibraryDomain", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "APICoreTests", dependencies: ["APICore", "HTTPServer", "LibraryDomain"], swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EventStreamsTests",
            dependencies: ["APICore", "EventStreams", "JSON", "LibraryDomain", "LiveEngine", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "LiveEngineTests", dependencies: ["LiveEngine", "LibraryDomain", "TestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "LibraryAPITests",
            dependencies: [
                "AccessTokens", "APICore", "EventStreams", "JSON", "LibraryAPI", "HTTPServer", "FuzzChecks",
                "LibraryDomain", "LibraryStorage", "LibraryMemoryStore", "LiveEngine", "PostgreSQL", "TestSupport",
                "CAllocationCounter", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
