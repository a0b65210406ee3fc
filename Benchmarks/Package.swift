// swift-tools-version:6.2

import PackageDescription

// The benchmark's comparators: the same four book routes on Hummingbird 2, over the same SQLite
// schema and settings, and (`--plain`) the plain GET and PATCH a Hummingbird user would write
// first; and `hummingbird-postgres`, GET and PATCH /books/{id} on Hummingbird 2 with PostgresNIO.
// A package of its own, so nothing here reaches the product's build.
let package = Package(
    name: "library-benchmarks",
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .executableTarget(
            name: "hummingbird-comparator",
            dependencies: ["CSQLite", .product(name: "Hummingbird", package: "hummingbird")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // GET and PATCH /books/{id} on Hummingbird 2 over PostgreSQL (PostgresNIO's PostgresClient),
        // against library-server's PostgreSQL engine (Benchmarks/postgres.py).
        .executableTarget(
            name: "hummingbird-postgres",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
