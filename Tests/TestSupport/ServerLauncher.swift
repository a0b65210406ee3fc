import Foundation

/// Starts the built `library-server` binary as a child process and waits for its one ready line
/// (`listening on http://HOST:PORT`); returns the process and the port it bound.
package func launchServer(
    _ binary: URL, _ arguments: [String], standardError: Any? = nil
) throws -> (process: Process, port: Int) {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    process.environment = [:]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = standardError ?? FileHandle.nullDevice
    try process.run()
    var line = ""
    while !line.hasSuffix("\n") {
        let byte = out.fileHandleForReading.readData(ofLength: 1)
        guard !byte.isEmpty else { break }
        line += String(decoding: byte, as: UTF8.self)
    }
    guard let port = Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
    else {
        if process.isRunning { process.terminate() }
        throw TestError("no ready line: \(line)")
    }
    return (process, port)
}
