import LibraryDomain

/// The answers kept for `Idempotency-Key`s, in `idempotency_keys` (migration 0006, PostgreSQL's
/// 0002): written in the transaction of the write they answer (`RememberedAnswer`).
extension SQLReader {
    /// The answer kept for `key`, if any and not expired at `now`.
    package func rememberedAnswer(forKey key: String, now: Int) throws -> RememberedAnswer? {
        try session.first(
            "SELECT fingerprint, status, headers, body FROM idempotency_keys WHERE key = ? AND created_at >= ?",
            [.text(key), .int(now - RememberedAnswer.retention)]
        ) { row in
            let headers = row.text(2).split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
            }
            return RememberedAnswer(
                fingerprint: row.text(0), status: row.int(1), headers: headers, body: Array(row.text(3).utf8))
        }
    }
}

extension SQLRows {
    /// Expired answers pruned by each keyed write: a few at a time keeps every write short, and
    /// keyed writes come at least as often as answers expire.
    static let idempotencyPruneBatch = 16

    /// Keeps `answer` for `key`, in this write's transaction, and prunes a few expired answers.
    func remember(_ answer: RememberedAnswer, forKey key: String, now: Int) throws {
        let headers = answer.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
        // The key's expired answer, if it was not pruned yet, makes way for this one.
        _ = try session.run(
            "DELETE FROM idempotency_keys WHERE key = ? AND created_at < ?",
            [.text(key), .int(now - RememberedAnswer.retention)])
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
            [.int(now - RememberedAnswer.retention), .int(Self.idempotencyPruneBatch)])
    }
}
