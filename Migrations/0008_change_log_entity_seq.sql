-- The change log keeps each resource's insertion order (its row's `seq`) as `entity_seq`, so that a
-- book that joins a watched library through a logged change (a replay, or a replica's feed) takes
-- its place among the library's members in the order lists page by, as one the writer returned
-- does. Rows logged before this migration have none (NULL): they are read as order 0.
ALTER TABLE change_log ADD COLUMN entity_seq INTEGER;
