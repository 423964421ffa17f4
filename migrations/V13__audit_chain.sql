-- The registry's audit log as hash chains, as every branch's (tenants/V21): each record
-- carries its lane, its position in the lane and a SHA-256 over its content and the hash of
-- the lane's previous record, so that a record changed, removed or slipped in afterwards
-- shows (`clinic-server audit verify`).
-- #include sql/shared/audit_chain/lanes.sql
-- A dropped branch's trail keeps its links.
ALTER TABLE dropped_branch_audit_log ADD COLUMN chain_lane smallint, ADD COLUMN chain_position bigint,
                                     ADD COLUMN chain_hash bytea;

-- #include sql/shared/audit_chain/heads_and_link.sql
ALTER FUNCTION audit_log_chain() SET search_path = pg_catalog, public, pg_temp;
-- #include sql/shared/audit_chain/trigger_and_backfill.sql
