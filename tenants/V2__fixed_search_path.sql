-- Functions of a branch schema resolve names in that schema only (and the catalog), never
-- in whatever search_path the calling session happens to have.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'next_patient_pin()', 'count_inserted_rows()', 'count_updated_rows()', 'count_deleted_rows()',
        'search_normalize(text)', 'next_certificate_number()'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn, current_schema());
    END LOOP;
END
$$;
