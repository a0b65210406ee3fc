-- The change log behind event-stream ids and resume.
-- One row per committed write: its `seq` is the event id, one global, strictly increasing sequence.
-- One item per resource the write touched: the names of the fields that changed and the resource
-- as it was after the change (the columns of `libraries` or `books`), so that missed changes can be
-- replayed exactly. Only the most recent changes are kept (`--history`); older ones are pruned.

CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    committed_at TEXT NOT NULL
);

CREATE TABLE change_items (
    seq INTEGER NOT NULL REFERENCES changes (seq) ON DELETE CASCADE,
    entity TEXT NOT NULL CHECK (entity IN ('library', 'book')),
    entity_id TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    -- Comma-separated names of the fields this change set (all of them for a creation).
    fields TEXT NOT NULL,
    -- A book's library before the change (NULL when it was created here).
    previous_library_id TEXT,
    -- The state after the change; for a deleted resource, its last state.
    library_id TEXT,
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
    updated_at TEXT NOT NULL,
    PRIMARY KEY (seq, entity, entity_id)
);

CREATE INDEX change_items_by_entity ON change_items (entity_id, seq);
CREATE INDEX change_items_by_library ON change_items (library_id, seq);
CREATE INDEX change_items_by_previous_library ON change_items (previous_library_id, seq);
