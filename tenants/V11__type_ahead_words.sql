-- The type-ahead matches each typed word as the start of a word of the patient's names or
-- PIN (any order, accents and case ignored): "ana pe" finds Ana Peña. The words are kept as
-- a tsvector so that a GIN index answers the prefixes of several words at once, without
-- reading the rows that match only some of them.
ALTER TABLE patients ADD COLUMN search_words tsvector GENERATED ALWAYS AS (
    array_to_tsvector(array_remove(regexp_split_to_array(search_normalize(
        first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name || ' '
        || coalesce(suffix, '') || ' ' || pin), '\W+'), ''))) STORED;
CREATE INDEX patients_words_idx ON patients USING gin (search_words) WHERE deleted_at IS NULL;
