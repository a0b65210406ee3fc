-- The change log reshaped by the ways it is used: appended once per write, replayed by sequence
-- for one resource or for one library and its members, pruned from its oldest end. Its content
-- is that of 0002: per resource a write touched, the fields it set and the resource afterwards.
--
-- One table instead of `changes` + `change_items`, and no index that no read needs:
-- - `item`, the row id, is the change's sequence number (the event id) times 2^24 plus the item's
--   position within the change. Rows are appended at the end of the table; a replay's range, the
--   latest id (the last row) and a prune (a range from the first row) are all row id ranges. No
--   AUTOINCREMENT, which wrote `sqlite_sequence` on every change.
-- - A library's own rows carry its id as `library_id`, so the library index alone finds a
--   library's changes and its members' (a book's `library_id` is its library after the change).
-- - `moved_from` is set only when a write moved a book, so the index over it stays small. A book
--   created by the write has every field name in `fields`, `id` included.
-- - No `committed_at`: nothing reads it.

CREATE TABLE change_log (
    item INTEGER PRIMARY KEY,
    entity TEXT NOT NULL CHECK (entity IN ('library', 'book')),
    entity_id TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    -- Comma-separated names of the fields this change set (all of them for a creation).
    fields TEXT NOT NULL,
    -- A library's own id; a book's library after the change (for a deleted book, its last).
    library_id TEXT NOT NULL,
    -- The library a book left in this change; NULL unless the change moved it.
    moved_from TEXT,
    name TEXT,
    address TEXT,
    book_count INTEGER,
    title TEXT,
    author TEXT,
    isbn TEXT,
    published_year INTEGER,
    available INTEGER,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

INSERT INTO change_log (item, entity, entity_id, deleted, fields, library_id, moved_from, name, address, book_count,
    title, author, isbn, published_year, available, version, created_at, updated_at)
SELECT (seq << 24) + row_number() OVER (PARTITION BY seq ORDER BY rowid) - 1,
    entity, entity_id, deleted, fields,
    CASE entity WHEN 'library' THEN entity_id ELSE library_id END,
    CASE WHEN entity = 'book' AND previous_library_id IS NOT NULL AND previous_library_id <> library_id
        THEN previous_library_id END,
    name, address, book_count, title, author, isbn, published_year, available, version, created_at, updated_at
FROM change_items;

DROP TABLE change_items;
DROP TABLE changes;
DELETE FROM sqlite_sequence WHERE name = 'changes';

CREATE INDEX change_log_by_entity ON change_log (entity_id, item);
CREATE INDEX change_log_by_library ON change_log (library_id, item);
CREATE INDEX change_log_by_moved_from ON change_log (moved_from, item) WHERE moved_from IS NOT NULL;
