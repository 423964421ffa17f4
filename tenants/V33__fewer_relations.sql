-- An empty branch in fewer relations: 178 become 150. At a thousand branches each relation is
-- a thousand catalogue entries that every backend serving them caches, and part of each build.

-- The fourteen examination views go: the server reads and writes `examinations` itself, each
-- declaration naming its `exam` (`resource::Shared`). A funduscopy left without `dilated` was
-- given the view's default; now the table's. Other examinations' rows never show it.
DROP VIEW visual_acuities, refractions, tonometries, slit_lamps, funduscopies, gonioscopies,
          corneal_topographies, amsler_grids, eoms, exophthalmometries, lacrimal_irrigations,
          radiologies, gross_examinations, indirect_ophthalmoscopies;
ALTER TABLE examinations ALTER COLUMN dilated SET DEFAULT false;

-- The audit log's key leads with `at`: it then serves what `audit_log_at_idx` served (the
-- trail by time, newest first, `at` and `id` breaking ties), one index fewer on every
-- partition and on every record written.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_pkey;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_pkey PRIMARY KEY (at, id);
DROP INDEX audit_log_at_idx;

-- Audit records take their ids from the branch's one sequence, as its rows do, after every id
-- either sequence gave. Each partition keeps a default of its own, written when it was made.
SELECT setval('row_id_seq', greatest((SELECT last_value FROM row_id_seq), (SELECT last_value FROM audit_log_id_seq)));
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT 'audit_log'::regclass UNION ALL SELECT inhrelid::regclass FROM pg_inherits
                 WHERE inhparent = 'audit_log'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN id SET DEFAULT nextval(%L)', part, 'row_id_seq');
    END LOOP;
END
$$;
DROP SEQUENCE audit_log_id_seq;

-- No default partition. A row it took blocked its month's partition from being made, so the
-- months are made ahead instead (`db::migrate::audit_months_ahead`), and a row written for a
-- month not yet made is refused, answered 503 `audit_month_missing`, and wakes the walk that
-- makes it. A default partition that holds rows keeps them until they are archived.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM audit_log_default) THEN
        DROP TABLE audit_log_default;
    END IF;
END
$$;

-- A queue's tickets are unique by day, service and position, in that order: the day's
-- tickets (the flow dashboard, `filters[queue_date]`) are read by the same index.
ALTER TABLE queue_tickets DROP CONSTRAINT queue_tickets_branch_service_id_queue_date_position_key;
ALTER TABLE queue_tickets ADD CONSTRAINT queue_tickets_day_service_position_key
    UNIQUE (queue_date, branch_service_id, position);
DROP INDEX queue_tickets_day_idx;

-- The dashboard's zone is kept with the branch's other facts. A spare has no `branch_info`
-- row and so no zone, as `dashboard_zone` held none before a dashboard was read.
ALTER TABLE branch_info ADD COLUMN timezone text;
UPDATE branch_info SET timezone = (SELECT timezone FROM dashboard_zone);
DO $$
DECLARE
    f oid;
BEGIN
    -- The functions that read or set the zone, each made again from its own definition
    -- (which keeps its settings) with the table's new name.
    FOR f IN SELECT p.oid FROM pg_proc p
              WHERE p.pronamespace = current_schema()::regnamespace AND p.prosrc LIKE '%dashboard_zone%'
    LOOP
        EXECUTE replace(pg_get_functiondef(f), 'dashboard_zone', 'branch_info');
    END LOOP;
END
$$;
DROP TABLE dashboard_zone;
