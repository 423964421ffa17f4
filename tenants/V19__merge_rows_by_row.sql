-- A merge or an undo moving rows that earlier merges moved too (a survivor merged into a third,
-- and that undone) carries those merges' recorded versions along, finding them by row.
CREATE INDEX patient_merge_rows_row_idx ON patient_merge_rows (table_name, row_id);
