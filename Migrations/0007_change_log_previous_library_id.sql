-- The change log's previous values are named after the field they hold: `previous_` and the
-- field's column (`previous_library_id`, `previous_author`, `previous_available`), so the server
-- makes their names from the field table (Sources/LibraryModel/Fields.swift). `moved_from` held the
-- library a book left; it is renamed, and its index with it. SQLite renames the column in the
-- index's definition too; the index is made again only to carry the new name.
ALTER TABLE change_log RENAME COLUMN moved_from TO previous_library_id;
DROP INDEX change_log_by_moved_from;
CREATE INDEX change_log_by_previous_library_id ON change_log (previous_library_id, item)
    WHERE previous_library_id IS NOT NULL;
