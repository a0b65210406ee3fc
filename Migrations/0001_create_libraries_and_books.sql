-- Libraries and their books.
-- `seq` is the insertion order: lists page by it, so rows inserted while a client pages appear at
-- the end and nothing is skipped or repeated. `id` is the public UUID (lowercase text).
-- Timestamps are RFC 3339 UTC text with milliseconds, which sorts in time order.

CREATE TABLE libraries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    address TEXT,
    book_count INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE books (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    library_id TEXT NOT NULL REFERENCES libraries (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    author TEXT NOT NULL DEFAULT '',
    isbn TEXT,
    published_year INTEGER,
    available INTEGER NOT NULL DEFAULT 1,
    version INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Filters page in `seq` order: each index ends with it so a filtered page is a range scan.
CREATE INDEX books_by_library ON books (library_id, seq);
CREATE INDEX books_by_author ON books (author, seq);
CREATE INDEX books_by_available ON books (available, seq);
