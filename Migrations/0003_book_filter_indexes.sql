-- Every combination of the book filters (libraryId, author, available) pages in `seq` order on an
-- index that holds all of its equality columns followed by `seq`, so a filtered page is one range
-- scan. With only one index per column, the planner (which has no statistics) could pick
-- `books_by_available` for `author = ? AND available = ?` and step through every available book.
-- The single-column indexes of 0001 stay: a prefix of these would need a sort by `seq`.
CREATE INDEX books_by_library_author ON books (library_id, author, seq);
CREATE INDEX books_by_library_available ON books (library_id, available, seq);
CREATE INDEX books_by_author_available ON books (author, available, seq);
CREATE INDEX books_by_library_author_available ON books (library_id, author, available, seq);
