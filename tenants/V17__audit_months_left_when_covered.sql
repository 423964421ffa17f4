-- In a branch's first month, that month is covered by `audit_log_until_partitioned` (the rows
-- from before partitioning, up to the next month). `audit_log_add_months` tried to create it
-- all the same, and PostgreSQL refused it only after building the table and its indexes, in an
-- exception block: 7 ms per branch at every walk (start-up and every six hours), seconds of
-- the database's time on a server whose branches were made this month. A month that a
-- partition's range already holds is now left alone before any attempt; a partial overlap
-- is still caught as before.
CREATE OR REPLACE FUNCTION audit_log_add_months(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    home text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE c.oid = 'audit_log'::regclass);
    month timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    name text;
    made integer := 0;
BEGIN
    FOR i IN 0..ahead LOOP
        name := 'audit_log_y' || to_char(month, 'YYYY') || 'm' || to_char(month, 'MM');
        IF to_regclass(format('%I.%I', home, name)) IS NULL AND NOT EXISTS (
            -- A range partition whose bounds hold the month's first moment. Bounds read as
            -- `FOR VALUES FROM (...) TO (...)`; the default partition has none.
            SELECT 1
              FROM pg_inherits i
              JOIN pg_class c ON c.oid = i.inhrelid
             CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                             '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS b(v)
             WHERE i.inhparent = format('%I.audit_log', home)::regclass
               AND (b.v[1] = 'MINVALUE' OR btrim(b.v[1], '''')::timestamptz <= month AT TIME ZONE 'UTC')
               AND (b.v[2] = 'MAXVALUE' OR btrim(b.v[2], '''')::timestamptz > month AT TIME ZONE 'UTC'))
        THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.audit_log FOR VALUES FROM (%L) TO (%L)',
                               home, name, home, month AT TIME ZONE 'UTC', (month + interval '1 month') AT TIME ZONE 'UTC');
                made := made + 1;
            EXCEPTION WHEN invalid_object_definition THEN
                NULL; -- a partition covers part of this month already
            END;
        END IF;
        month := month + interval '1 month';
    END LOOP;
    RETURN made;
END
$$;
-- CREATE OR REPLACE resets a function's settings: it resolves names in its schema again.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION audit_log_add_months(integer) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END
$$;
