import Glibc
import LibraryDomain

/// The answer a `POST` with an `Idempotency-Key` got, as kept in `idempotency_keys` (migration 0006,
/// PostgreSQL's 0002): written in the transaction of the write it answers, so a retry with the same
/// key, on any replica, finds it exactly when the write committed, and gets it again instead of
/// writing twice.
package struct RememberedAnswer: Sendable {
    /// The SHA-256 of the request the key was first sent with (method, path and body).
    package let fingerprint: String
    package let status: Int
    package let headers: [(name: String, value: String)]
    package let body: [UInt8]

    package init(fingerprint: String, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.fingerprint = fingerprint
        self.status = status
        self.headers = headers
        self.body = body
    }
}

extension LibraryWriter {
    /// How long an answer is kept at least: 24 hours, as the contract promises.
    package static let idempotencyRetention = 24 * 3_600
    /// Expired answers pruned by each keyed write: a few at a time keeps every write short, and
    /// keyed writes come at least as often as answers expire.
    static let idempotencyPruneBatch = 16

    /// The answer kept for `key`, if any.
    package func rememberedAnswer(forKey key: String) throws -> RememberedAnswer? {
        try session.first(
            "SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE key = ?", [.text(key)]
        ) { row in
            let headers = row.text(2).split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
            }
            return RememberedAnswer(
                fingerprint: row.text(0), status: row.int(1), headers: headers, body: Array(row.text(3).utf8))
        }
    }

    /// Keeps `answer` for `key`, in this write's transaction, and prunes a few expired answers.
    package func remember(_ answer: RememberedAnswer, forKey key: String) throws {
        let now = Int(time(nil))
        let headers = answer.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
        _ = try session.run(
            "INSERT INTO idempotency_keys (key, fingerprint, status, headers, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                .text(key), .text(answer.fingerprint), .int(answer.status), .text(headers),
                .text(String(decoding: answer.body, as: UTF8.self)), .int(now),
            ])
        _ = try session.run(
            """
            DELETE FROM idempotency_keys WHERE key IN (
                SELECT key FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)
            """,
            [.int(now - Self.idempotencyRetention), .int(Self.idempotencyPruneBatch)])
    }
}
