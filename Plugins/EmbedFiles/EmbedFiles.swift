import Foundation
import PackagePlugin

/// Embeds package files into a target as Swift source, so the binary needs no files at run time.
///
/// Which files a target gets is decided here by the target's name: the storage layer embeds the numbered
/// migrations (the only source of the schema), the API embeds the OpenAPI document it serves and the
/// console's files (`Sources/LibraryAPI/Console`, served at `/` and `/console/…`).
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let root = context.package.directoryURL
        switch target.name {
        case "LibraryStorage":
            // SQLite's migrations, and PostgreSQL's beside them in Migrations/postgres.
            return [
                try command(context, "EmbeddedMigrations", sqlFiles(in: root.appending(path: "Migrations"))),
                try command(
                    context, "EmbeddedPostgresMigrations", sqlFiles(in: root.appending(path: "Migrations/postgres"))),
            ]
        case "LibraryAPI":
            let console = root.appending(path: "Sources/LibraryAPI/Console")
            let consoleFiles = try FileManager.default.contentsOfDirectory(at: console, includingPropertiesForKeys: nil)
                .filter { !$0.lastPathComponent.hasPrefix(".") }
                .sorted { $0.lastPathComponent < $1.lastPathComponent }
            return [
                try command(context, "EmbeddedSpec", [root.appending(path: "openapi.yaml")]),
                try command(context, "EmbeddedConsole", consoleFiles),
            ]
        default:
            return []
        }
    }

    private func sqlFiles(in folder: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    private func command(_ context: PluginContext, _ typeName: String, _ inputs: [URL]) throws -> Command {
        let output = context.pluginWorkDirectoryURL.appending(path: "\(typeName).swift")
        return .buildCommand(
            displayName: "Embedding \(inputs.count) file(s) as \(typeName)",
            executable: try context.tool(named: "EmbedFilesTool").url,
            arguments: [typeName, output.path()] + inputs.map { $0.path() },
            inputFiles: inputs,
            outputFiles: [output]
        )
    }
}
