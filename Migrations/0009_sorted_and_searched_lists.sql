-- Sorted and searched lists (`GET /books?sort=title&q=dune`, `GET /libraries?sort=name`).
--
-- Each sortable field has an index of its sort key followed by `id` (ties are broken by `id`),
-- alone and after `library_id`, so that a sorted page of one library or of every book is a range
-- of one index from the cursor on, read forwards (`sort=title`) or backwards (`sort=-title`). The
-- keys are what Migrations/postgres/0005 indexes too, so both engines give one order:
-- - text in `COLLATE NOCASE`: ASCII letters without case, everything else byte for byte;
-- - `published_year` as `coalesce(published_year, -10000)`: a missing year before every year,
--   kept as a virtual generated column (computed when read, stored only in its indexes), because
--   SQLite compares a row value such as `(published_year_key, id) > (?, ?)` with an index range on
--   columns, not on expressions;
-- - timestamps and counts as they are.
-- A page after a cursor is the range `(key, id) > (?, ?)` of the index (`<` descending), so rows
-- tied on the key (a bulk import's one `updatedAt`) are skipped by the index, not stepped over.
ALTER TABLE books ADD COLUMN published_year_key INTEGER
    GENERATED ALWAYS AS (coalesce(published_year, -10000)) VIRTUAL;
CREATE INDEX books_by_title ON books (title COLLATE NOCASE, id);
CREATE INDEX books_by_library_title ON books (library_id, title COLLATE NOCASE, id);
CREATE INDEX books_by_author_id ON books (author COLLATE NOCASE, id);
CREATE INDEX books_by_library_author_id ON books (library_id, author COLLATE NOCASE, id);
CREATE INDEX books_by_published_year ON books (published_year_key, id);
CREATE INDEX books_by_library_published_year ON books (library_id, published_year_key, id);
CREATE INDEX books_by_created_at ON books (created_at, id);
CREATE INDEX books_by_library_created_at ON books (library_id, created_at, id);
CREATE INDEX books_by_updated_at ON books (updated_at, id);
CREATE INDEX books_by_library_updated_at ON books (library_id, updated_at, id);

CREATE INDEX libraries_by_name ON libraries (name COLLATE NOCASE, id);
CREATE INDEX libraries_by_created_at ON libraries (created_at, id);
CREATE INDEX libraries_by_updated_at ON libraries (updated_at, id);
CREATE INDEX libraries_by_book_count ON libraries (book_count, id);

-- `q=`: a full-text index of every three-character piece (trigram) of each book's title and
-- author, case folded, kept by the triggers below from the `books` rows it indexes (an external
-- content table: the text is stored once, in `books`). A search reads the rows holding the text's
-- trigrams from it, then tests them with `LIKE` (SQLite's folds ASCII letters only).
CREATE VIRTUAL TABLE books_search USING fts5 (
    title, author, content = 'books', content_rowid = 'seq', tokenize = 'trigram'
);
INSERT INTO books_search (books_search) VALUES ('rebuild');

CREATE TRIGGER books_search_insert AFTER INSERT ON books BEGIN
    INSERT INTO books_search (rowid, title, author) VALUES (new.seq, new.title, new.author);
END;
-- Also for the books a library's deletion takes with it (ON DELETE CASCADE runs the triggers).
CREATE TRIGGER books_search_delete AFTER DELETE ON books BEGIN
    INSERT INTO books_search (books_search, rowid, title, author) VALUES ('delete', old.seq, old.title, old.author);
END;
CREATE TRIGGER books_search_update AFTER UPDATE OF title, author ON books BEGIN
    INSERT INTO books_search (books_search, rowid, title, author) VALUES ('delete', old.seq, old.title, old.author);
    INSERT INTO books_search (rowid, title, author) VALUES (new.seq, new.title, new.author);
END;
