-- The audit log grows with every read (lists and searches record who saw which patients):
-- it is partitioned by month of `at`, so that an old month is detached and archived in one
-- step instead of a long delete (`clinic-server audit archive`). The rows so far become one
-- partition; months ahead are made by `audit_log_add_months`, which the server calls at
-- start-up and daily. A default partition takes any row no month is ready for.
ALTER TABLE audit_log RENAME TO audit_log_until_partitioned;
-- A partitioned table's key holds its partition column: (id, at) replaces (id).
ALTER TABLE audit_log_until_partitioned DROP CONSTRAINT audit_log_pkey;
ALTER INDEX audit_log_record_idx RENAME TO audit_log_until_partitioned_record_idx;
ALTER INDEX audit_log_at_idx RENAME TO audit_log_until_partitioned_at_idx;
ALTER INDEX audit_log_user_idx RENAME TO audit_log_until_partitioned_user_idx;

CREATE TABLE audit_log (
    id         bigint NOT NULL DEFAULT nextval('audit_log_id_seq'),
    at         timestamptz NOT NULL DEFAULT now(),
    user_id    bigint,
    action     text NOT NULL,
    resource   text NOT NULL,
    record_id  bigint,
    before     jsonb,
    after      jsonb,
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
-- The ids go on from the same sequence, which must outlive any partition.
ALTER SEQUENCE audit_log_id_seq OWNED BY audit_log.id;
CREATE INDEX audit_log_record_idx ON audit_log (resource, record_id, at);
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_user_idx ON audit_log (user_id, at);

DO $$
BEGIN
    EXECUTE format(
        'ALTER TABLE audit_log ATTACH PARTITION audit_log_until_partitioned FOR VALUES FROM (MINVALUE) TO (%L)',
        date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month');
END
$$;
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

-- Makes the monthly partitions (UTC months, `audit_log_yYYYYmMM`) from the current month to
-- `ahead` months past it, leaving the months a partition already covers. Answers how many it
-- made.
CREATE FUNCTION audit_log_add_months(ahead integer) RETURNS integer
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
        IF to_regclass(format('%I.%I', home, name)) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.audit_log FOR VALUES FROM (%L) TO (%L)',
                               home, name, home, month AT TIME ZONE 'UTC', (month + interval '1 month') AT TIME ZONE 'UTC');
                made := made + 1;
            EXCEPTION WHEN invalid_object_definition THEN
                NULL; -- a partition covers this month already (the rows from before partitioning)
            END;
        END IF;
        month := month + interval '1 month';
    END LOOP;
    RETURN made;
END
$$;
