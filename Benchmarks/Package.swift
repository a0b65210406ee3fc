// swift-tools-version:6.2

import PackageDescription

// The benchmark's comparators: the same four book routes on Hummingbird 2, over the same SQLite
// schema and settings, and (`--plain`) the plain GET and PATCH a Hummingbird user would write
// first. A package of its own, so nothing here reaches the product's build.
let package = Package(
    name: "library-benchmarks",
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1")
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .executableTarget(
            name: "hummingbird-comparator",
            dependencies: ["CSQLite", .product(name: "Hummingbird", package: "hummingbird")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
