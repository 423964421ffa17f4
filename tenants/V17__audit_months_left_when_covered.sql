-- In a branch's first month, that month is covered by `audit_log_until_partitioned` (the rows
-- from before partitioning, up to the next month). `audit_log_add_months` tried to create it
-- all the same, and PostgreSQL refused it only after building the table and its indexes, in an
-- exception block: 7 ms per branch at every walk (start-up and every six hours), seconds of
-- the database's time on a server whose branches were made this month. Now only the months
-- that no partition's range holds are created.
-- The bounds are read back from their text, written and parsed here in ISO dates whatever the
-- caller's DateStyle.
CREATE OR REPLACE FUNCTION audit_log_add_months(ahead integer) RETURNS integer
LANGUAGE plpgsql SET datestyle = 'ISO, MDY' AS $$
DECLARE
    log regclass := 'audit_log'::regclass;
    home text := (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = log);
    -- Months are counted on UTC's calendar (in `timestamp`: a month added to a `timestamptz`
    -- follows the session's time zone, and its daylight saving time).
    first timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    month timestamp;
    made integer := 0;
BEGIN
    FOR month IN
        SELECT m FROM generate_series(first, first + ahead * interval '1 month', interval '1 month') AS m
         WHERE NOT EXISTS (
             -- A range partition whose bounds hold the month's first moment. Bounds read as
             -- `FOR VALUES FROM (...) TO (...)`; the default partition has none.
             SELECT 1
               FROM pg_inherits i
               JOIN pg_class c ON c.oid = i.inhrelid
              CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                              '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS b(v)
              WHERE i.inhparent = log
                AND (b.v[1] = 'MINVALUE' OR btrim(b.v[1], '''')::timestamptz <= m AT TIME ZONE 'UTC')
                AND (b.v[2] = 'MAXVALUE' OR btrim(b.v[2], '''')::timestamptz > m AT TIME ZONE 'UTC'))
    LOOP
        BEGIN
            EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)', home,
                           'audit_log_y' || to_char(month, 'YYYY"m"MM'), log,
                           month AT TIME ZONE 'UTC', (month + interval '1 month') AT TIME ZONE 'UTC');
            made := made + 1;
        EXCEPTION WHEN invalid_object_definition THEN
            NULL; -- a partition holds part of this month
        END;
    END LOOP;
    RETURN made;
END
$$;
-- CREATE OR REPLACE resets a function's settings: it resolves names in its schema again.
DO $$ BEGIN EXECUTE format('ALTER FUNCTION audit_log_add_months(integer) SET search_path = pg_catalog, %I, pg_temp',
                           current_schema()); END $$;
