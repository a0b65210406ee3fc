-- The PostgreSQL schema: the same tables, columns, order and change log as the SQLite migrations
-- 0001-0005 arrive at, so that every route answers the same on both engines.
--
-- - Identifiers and the text the book filters compare use the "C" collation: equality and order
--   are byte for byte, as in SQLite.
-- - `seq` is the insertion order lists page by. Every write holds the advisory lock of its schema
--   from its first statement to its commit (LibraryStorePG), so `seq` values commit in order and a
--   client paging while others insert never skips a row, as with SQLite's single writer.
-- - Timestamps stay RFC 3339 text with milliseconds, written by the server, as on SQLite.

CREATE TABLE libraries (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE,
    name text NOT NULL,
    address text,
    book_count bigint NOT NULL DEFAULT 0,
    version bigint NOT NULL DEFAULT 1,
    created_at text NOT NULL,
    updated_at text NOT NULL
);

CREATE TABLE books (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE,
    library_id text COLLATE "C" NOT NULL REFERENCES libraries (id) ON DELETE CASCADE,
    title text NOT NULL,
    author text COLLATE "C" NOT NULL DEFAULT '',
    isbn text,
    published_year bigint,
    available boolean NOT NULL DEFAULT true,
    version bigint NOT NULL DEFAULT 1,
    created_at text NOT NULL,
    updated_at text NOT NULL
);

-- Every combination of the filters pages in `seq` order on one index (as Migrations/0003).
CREATE INDEX books_by_library ON books (library_id, seq);
CREATE INDEX books_by_author ON books (author, seq);
CREATE INDEX books_by_available ON books (available, seq);
CREATE INDEX books_by_library_author ON books (library_id, author, seq);
CREATE INDEX books_by_library_available ON books (library_id, available, seq);
CREATE INDEX books_by_author_available ON books (author, available, seq);
CREATE INDEX books_by_library_author_available ON books (library_id, author, available, seq);

-- The change log behind event ids, resume and the replicas' live updates (as Migrations/0004 and
-- 0005): `item` is the change's sequence number (the event id) times 2^24 plus the item's position
-- in the change. Ids are taken under the schema's advisory lock, held until commit, so an id is
-- never visible before every smaller one: every replica reads the log in id order and misses none.
CREATE TABLE change_log (
    item bigint PRIMARY KEY,
    entity text NOT NULL CHECK (entity IN ('library', 'book')),
    entity_id text COLLATE "C" NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    fields text NOT NULL,
    library_id text COLLATE "C" NOT NULL,
    moved_from text COLLATE "C",
    name text,
    address text,
    book_count bigint,
    title text,
    author text COLLATE "C",
    isbn text,
    published_year bigint,
    available boolean,
    version bigint NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    previous_author text COLLATE "C",
    previous_available boolean
);

CREATE INDEX change_log_by_entity ON change_log (entity_id, item);
CREATE INDEX change_log_by_library ON change_log (library_id, item);
CREATE INDEX change_log_by_moved_from ON change_log (moved_from, item) WHERE moved_from IS NOT NULL;
