-- The type-ahead matches each typed word as the start of a word of the patient's names or
-- PIN number (any order, accents and case ignored): "ana pe" finds Ana Peña. Every start
-- of every word (up to 20 characters) is kept as a lexeme, so that a typed word is an exact
-- lexeme of the GIN index: its posting lists are intersected with the other words' (a
-- prefix search would first gather every row of every word it extends to). The PIN
-- counts by its number, with and without its zeros, not by the branch code every PIN
-- shares; a whole PIN typed is matched as such.
CREATE FUNCTION search_prefixes(text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(
        SELECT DISTINCT left(word, n)
          FROM unnest(regexp_split_to_array($1, '\W+')) AS word,
               generate_series(1, least(length(word), 20)) AS n
         WHERE word <> ''))
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION search_prefixes(text) SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;
ALTER TABLE patients ADD COLUMN search_prefixes tsvector GENERATED ALWAYS AS (search_prefixes(search_normalize(
    first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name || ' ' || coalesce(suffix, '') || ' '
    || split_part(pin, '-', 2) || ' ' || ltrim(split_part(pin, '-', 2), '0')))) STORED;
CREATE INDEX patients_prefixes_idx ON patients USING gin (search_prefixes) WHERE deleted_at IS NULL;
