-- Sorted and searched lists, as Migrations/0009: each sortable field's key followed by `id`, alone
-- and after `library_id`, with the same order as SQLite's:
-- - text as `lower(text COLLATE "C")`: ASCII letters folded (the "C" collation's `lower` folds
--   nothing else), then byte for byte;
-- - `published_year` as `coalesce(published_year, -10000)`;
-- - timestamps byte for byte ("C"), counts as they are.
CREATE INDEX books_by_title ON books (lower(title COLLATE "C"), id);
CREATE INDEX books_by_library_title ON books (library_id, lower(title COLLATE "C"), id);
CREATE INDEX books_by_author_id ON books (lower(author COLLATE "C"), id);
CREATE INDEX books_by_library_author_id ON books (library_id, lower(author COLLATE "C"), id);
CREATE INDEX books_by_published_year ON books (coalesce(published_year, -10000), id);
CREATE INDEX books_by_library_published_year ON books (library_id, coalesce(published_year, -10000), id);
CREATE INDEX books_by_created_at ON books ((created_at COLLATE "C"), id);
CREATE INDEX books_by_library_created_at ON books (library_id, (created_at COLLATE "C"), id);
CREATE INDEX books_by_updated_at ON books ((updated_at COLLATE "C"), id);
CREATE INDEX books_by_library_updated_at ON books (library_id, (updated_at COLLATE "C"), id);

CREATE INDEX libraries_by_name ON libraries (lower(name COLLATE "C"), id);
CREATE INDEX libraries_by_created_at ON libraries ((created_at COLLATE "C"), id);
CREATE INDEX libraries_by_updated_at ON libraries ((updated_at COLLATE "C"), id);
CREATE INDEX libraries_by_book_count ON libraries (book_count, id);

-- `q=`: pg_trgm's trigram indexes of the title and the author, which `ILIKE` under the "C"
-- collation (ASCII letters without case, as SQLite's `LIKE`) searches. The extension is installed
-- once per database, in `public` unless it is already there (it is trusted: a database owner may
-- create it); the indexes name its operator class in whichever schema holds it.
DO $$
DECLARE
    home text;
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
    SELECT n.nspname INTO home
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    EXECUTE format('CREATE INDEX books_title_trigrams ON books USING gin (title COLLATE "C" %I.gin_trgm_ops)', home);
    EXECUTE format('CREATE INDEX books_author_trigrams ON books USING gin (author COLLATE "C" %I.gin_trgm_ops)', home);
END
$$;
