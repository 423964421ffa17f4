-- #include sql/shared/audit_by_month.sql
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION audit_log_add_months(integer) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END
$$;
SELECT audit_log_add_months(2);
