import AccessTokens
import Foundation

/// The `--jwt-keys` file: a JWK set (RFC 7517), read whole at start and on each SIGHUP.
enum KeyFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Larger than any key set needs; a file past it is a mistake, not a key set.
    static let maxBytes = 1 << 20

    static func read(_ path: String) throws -> JSONWebKeySet {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw Failure(description: "cannot open \(path)")
        }
        defer { try? handle.close() }
        let data = try handle.read(upToCount: maxBytes + 1) ?? Data()
        guard data.count <= maxBytes else { throw Failure(description: "\(path) is larger than 1 MiB") }
        do {
            let keys = try JSONWebKeySet(parsing: Array(data))
            guard !keys.keys.isEmpty else {
                throw Failure(description: "\(path) has no key this server can use (oct, EC P-256, OKP Ed25519)")
            }
            return keys
        } catch let failure as JSONWebKeySet.Failure {
            throw Failure(description: failure.message)
        }
    }
}
