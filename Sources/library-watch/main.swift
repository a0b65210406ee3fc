import Foundation
import LibraryClient
import Observation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `library-watch BASE_URL LIBRARY_ID [--rows N]`: a library live in the terminal, through the client.
///
/// The screen is a `body` in the SwiftUI sense: one function that reads the library's name, its
/// book count and the titles of the rows in view, re-run under `withObservationTracking` only when
/// one of those fields changes. So the client watches exactly those fields, and a change of a field
/// not shown redraws nothing: the status line counts redraws to show it.
@main
@MainActor
enum LibraryWatch {
    static let usage = "usage: library-watch BASE_URL LIBRARY_ID [--rows N] [--token T] [--read-token T]"
    static var client: LibraryClient!
    static var library: Library!
    static var rows = 20
    static var redraws = 0

    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
            defer { arguments.removeSubrange(index...index + 1) }
            return arguments[index + 1]
        }
        rows = option("--rows").flatMap(Int.init) ?? 20
        let environment = ProcessInfo.processInfo.environment
        let token = option("--token") ?? environment["LIBRARY_API_TOKEN"]
        let readToken = option("--read-token") ?? environment["LIBRARY_READ_TOKEN"]
        guard arguments.count == 2, let base = URL(string: arguments[0]), let id = UUID(uuidString: arguments[1])
        else {
            FileHandle.standardError.write(Data((usage + "\n").utf8))
            exit(2)
        }
        client = LibraryClient(baseURL: base, apiToken: token, readToken: readToken)
        do {
            library = try await client.library(id: id)
        } catch {
            FileHandle.standardError.write(Data("library-watch: \(error.detail)\n".utf8))
            exit(1)
        }
        signal(SIGINT) { _ in
            FileHandle.standardOutput.write(Data("\u{1B}[0m\n".utf8))
            exit(0)
        }
        render()
        while true { try? await Task.sleep(for: .seconds(3600)) }
    }

    /// The screen's text: what is read here is what the client subscribes to.
    static func screen() -> String {
        var lines: [String] = []
        if library.isDeleted {
            lines.append("\u{1B}[1m(library deleted)\u{1B}[0m")
        } else {
            lines.append("\u{1B}[1m\(library.name)\u{1B}[0m  \(library.bookCount) books")
            lines.append(String(repeating: "─", count: 40))
            let books = library.books
            for book in books.prefix(rows) { lines.append("  " + book.title) }
            if books.count > rows { lines.append("  … \(books.count - rows) more") }
        }
        let state: String
        switch client.connection {
        case .idle: state = "idle"
        case .connecting: state = "connecting"
        case .live: state = "live"
        case .offline(let next, let reason):
            let seconds = max(0, Int(next.timeIntervalSinceNow.rounded()))
            state = "offline (\(reason.prefix(60))), next attempt in \(seconds) s"
        }
        lines.append("")
        lines.append("\u{1B}[2m\(state) · redraws \(redraws) · Ctrl-C quits\u{1B}[0m")
        return lines.joined(separator: "\n")
    }

    /// Draws, and draws again when something drawn changes: the render loop of a view.
    static func render() {
        redraws += 1
        let text = withObservationTracking {
            screen()
        } onChange: {
            Task { @MainActor in LibraryWatch.render() }
        }
        // Home, clear, draw: any ANSI terminal, tmux included.
        FileHandle.standardOutput.write(Data(("\u{1B}[H\u{1B}[2J" + text).utf8))
    }
}
