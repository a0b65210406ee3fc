import Foundation
import PackagePlugin

/// Embeds package files into a target as Swift source, so the binary needs no files at run time.
///
/// Which files a target gets is decided here by the target's name: the storage layer embeds the numbered
/// migrations (the only source of the schema), the API embeds the OpenAPI document it serves.
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let root = context.package.directoryURL
        let inputs: [URL]
        let typeName: String
        switch target.name {
        case "LibraryStorage":
            let folder = root.appending(path: "Migrations")
            inputs = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension == "sql" }
                .sorted { $0.lastPathComponent < $1.lastPathComponent }
            typeName = "EmbeddedMigrations"
        case "LibraryAPI":
            inputs = [root.appending(path: "openapi.yaml")]
            typeName = "EmbeddedSpec"
        default:
            return []
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "\(typeName).swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) file(s) as \(typeName)",
                executable: try context.tool(named: "EmbedFilesTool").url,
                arguments: [typeName, output.path()] + inputs.map { $0.path() },
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
