-- The audit log as hash chains: each record carries its lane, its position in the lane and
-- a SHA-256 over its content and the hash of the lane's previous record, so that a record
-- changed, removed or slipped in afterwards shows (`clinic-server audit verify`).
-- #include sql/shared/audit_chain/lanes.sql
-- #include sql/shared/audit_chain/heads_and_link.sql
DO $$ BEGIN EXECUTE format('ALTER FUNCTION audit_log_chain() SET search_path = pg_catalog, %I, pg_temp',
                           current_schema()); END $$;
-- #include sql/shared/audit_chain/trigger_and_backfill.sql
