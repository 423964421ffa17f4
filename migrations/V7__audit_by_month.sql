-- #include sql/shared/audit_by_month.sql
ALTER FUNCTION audit_log_add_months(integer) SET search_path = pg_catalog, public, pg_temp;
SELECT audit_log_add_months(2);
