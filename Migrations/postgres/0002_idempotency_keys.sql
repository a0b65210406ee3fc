-- The answers to POSTs sent with an Idempotency-Key, written in the transaction of the write they
-- answer, so that a retry with the same key, sent to any replica, gets the first answer and creates
-- nothing. Kept at least 24 hours; pruned a few at a time by later keyed POSTs.
CREATE TABLE idempotency_keys (
    key text COLLATE "C" PRIMARY KEY,
    -- SHA-256 of the method, the path and the body: the same key with another request is a 422.
    fingerprint text NOT NULL,
    status integer NOT NULL,
    -- The answer's own header fields, one "Name: value" a line.
    headers text NOT NULL,
    body text NOT NULL,
    -- Seconds since 1970, UTC.
    created_at bigint NOT NULL
);

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
