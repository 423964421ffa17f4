-- The type-ahead matches each typed word as the start of a word of the patient's names or
-- PIN number (any order, accents and case ignored): "ana pe" finds Ana Peña. Every start
-- of every word (up to 20 characters) is a lexeme of a GIN index, so that a typed word is
-- an exact lexeme and the typed words' posting lists are intersected in the index (a
-- prefix search would first gather every row of every word it extends to). The PIN counts
-- by its number, with and without its zeros, not by the branch code every PIN shares; a
-- whole PIN typed is matched as such. The index is on an expression, not a stored column,
-- so that the rows every other read goes through stay as narrow as they were.
CREATE FUNCTION patient_prefixes(first_name text, middle_name text, last_name text, suffix text, pin text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(
        SELECT DISTINCT left(word, n)
          FROM unnest(regexp_split_to_array(search_normalize(
                   first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name || ' '
                   || coalesce(suffix, '') || ' ' || split_part(pin, '-', 2) || ' '
                   || ltrim(split_part(pin, '-', 2), '0')), '\W+')) AS word,
               generate_series(1, least(length(word), 20)) AS n
         WHERE word <> ''))
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION patient_prefixes(text, text, text, text, text) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END
$$;
CREATE INDEX patients_prefixes_idx ON patients
    USING gin (patient_prefixes(first_name, middle_name, last_name, suffix, pin)) WHERE deleted_at IS NULL;
