-- The type-ahead sorts a term's matches by name from `patient_search`'s rows. Where the rows
-- lie in name order, a surname's matches share a few pages (the 4,000 patients named Peña of
-- 100,000: 63 pages against 1,532), and the statement costs a third of what it costs over
-- rows in the order they were registered. This puts the table in name order when the order
-- has decayed: the answers never depend on it (every statement sorts), only their cost.
--
-- Run by the server in a branch's quiet hours (`tenancy::search_order`). It holds the
-- table's ACCESS EXCLUSIVE lock while it rewrites it (seconds for 100,000 patients: the
-- indexes are built again), so it gives up at once rather than queue behind a reader, and
-- two callers never rewrite one branch at the same time.
--
-- `min_rows`: smaller tables are left as they are. `below`: the order is kept while the
-- correlation of `last_name` with the rows' places (pg_stats) is at least this.
CREATE FUNCTION patient_search_put_in_name_order(min_rows bigint, below real) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    home name := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE c.oid = 'patient_search'::regclass);
    kept real;
BEGIN
    IF (SELECT reltuples FROM pg_class WHERE oid = 'patient_search'::regclass) < min_rows THEN
        RETURN false;
    END IF;
    IF NOT pg_try_advisory_xact_lock('patient_search'::regclass::oid::integer, 0) THEN
        RETURN false;
    END IF;
    kept := (SELECT correlation FROM pg_stats
              WHERE schemaname = home AND tablename = 'patient_search' AND attname = 'last_name');
    IF kept IS NULL THEN
        ANALYZE patient_search;
        kept := (SELECT correlation FROM pg_stats
                  WHERE schemaname = home AND tablename = 'patient_search' AND attname = 'last_name');
    END IF;
    IF kept >= below THEN
        RETURN false;
    END IF;
    PERFORM set_config('lock_timeout', '1s', true);
    CREATE INDEX patient_search_name_order ON patient_search (last_name, first_name, id);
    CLUSTER patient_search USING patient_search_name_order;
    DROP INDEX patient_search_name_order;
    ANALYZE patient_search;
    RETURN true;
END
$$;

DO $$ BEGIN
    EXECUTE format('ALTER FUNCTION patient_search_put_in_name_order(bigint, real) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END $$;
