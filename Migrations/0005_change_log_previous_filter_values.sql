-- Collection streams (`/books/events?author=…&available=…`) decide from a logged change whether a
-- book entered or left their filter, which needs the values the filter tests as they were before
-- the change. `moved_from` already holds the library a book left; these two hold the author and
-- availability it had, set only when the change altered them (NULL: unchanged, or a creation).
-- Rows logged before this migration have neither: a resume across them reads them as unchanged.
ALTER TABLE change_log ADD COLUMN previous_author TEXT;
ALTER TABLE change_log ADD COLUMN previous_available INTEGER;
