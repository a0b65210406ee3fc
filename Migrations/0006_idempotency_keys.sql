-- The answers to POSTs sent with an Idempotency-Key, written in the transaction of the write they
-- answer, so that a retry with the same key gets the first answer and creates nothing. Kept at
-- least 24 hours; pruned a few at a time by later keyed POSTs.
CREATE TABLE idempotency_keys (
    key TEXT PRIMARY KEY,
    -- SHA-256 of the method, the path and the body: the same key with another request is a 422.
    fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL,
    -- The answer's own header fields, one "Name: value" a line.
    headers TEXT NOT NULL,
    body TEXT NOT NULL,
    -- Seconds since 1970, UTC.
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
