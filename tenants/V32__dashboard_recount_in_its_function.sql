-- The two views only `dashboard_recount_differences()` read become its own query: a view is a
-- relation, a row type and a rewrite rule in every branch, and the recount's was one of the
-- costlier statements of a branch's build.
DROP FUNCTION dashboard_recount_differences();
DROP VIEW dashboard_kept, dashboard_recount;

-- Every key whose kept figures differ from a recount of the base tables (in the zone of
-- dashboard_zone), either side NULL when it has no row; kept rows at zero are left out.
-- Numbers compare as numbers (jsonb equality): 1.50 equals 1.5.
CREATE FUNCTION dashboard_recount_differences()
RETURNS TABLE (rollup text, key jsonb, kept jsonb, recounted jsonb)
LANGUAGE sql STABLE AS $$
    WITH recount (rollup, key, figures) AS (
        SELECT 'visit_day_counts', jsonb_build_array(visit_date, status), jsonb_build_array(count(*))
          FROM patient_visits WHERE deleted_at IS NULL GROUP BY visit_date, status
        UNION ALL
        SELECT 'queue_day_counts', jsonb_build_array(queue_date, status),
               jsonb_build_array(count(*), count(called_at), coalesce(sum(queue_wait_seconds(called_at, created_at)), 0))
          FROM queue_tickets WHERE deleted_at IS NULL GROUP BY queue_date, status
        UNION ALL
        SELECT 'billing_day_totals', jsonb_build_array(transaction_date), jsonb_build_array(sum(a.charges), sum(a.payments))
          FROM billing_transactions, billing_day_amounts(kind, status, amount, deleted_at) a
         WHERE status = 'posted' AND deleted_at IS NULL AND (a.charges <> 0 OR a.payments <> 0)
         GROUP BY transaction_date
        UNION ALL
        SELECT 'patient_counts', jsonb_build_array(k.dimension, k.value, k.spelling), jsonb_build_array(count(*))
          FROM patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k
         WHERE deleted_at IS NULL GROUP BY k.dimension, k.value, k.spelling
        UNION ALL
        SELECT 'patient_registrations', jsonb_build_array(p.span, p.period, k.dimension, k.value, k.spelling),
               jsonb_build_array(count(*))
          FROM dashboard_zone z, patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k,
               LATERAL (VALUES ('d'::"char", registered_on(created_at, z.timezone)),
                               ('m'::"char", date_trunc('month', registered_on(created_at, z.timezone))::date)) AS p (span, period)
         WHERE deleted_at IS NULL AND z.timezone IS NOT NULL
         GROUP BY p.span, p.period, k.dimension, k.value, k.spelling
    ), kept (rollup, key, figures) AS (
        SELECT 'visit_day_counts', jsonb_build_array(visit_date, status), jsonb_build_array(n)
          FROM visit_day_counts WHERE n <> 0
        UNION ALL
        SELECT 'queue_day_counts', jsonb_build_array(queue_date, status), jsonb_build_array(n, waited, wait_seconds)
          FROM queue_day_counts WHERE n <> 0 OR waited <> 0 OR wait_seconds <> 0
        UNION ALL
        SELECT 'billing_day_totals', jsonb_build_array(transaction_date), jsonb_build_array(charges, payments)
          FROM billing_day_totals WHERE charges <> 0 OR payments <> 0
        UNION ALL
        SELECT 'patient_counts', jsonb_build_array(dimension, value, spelling), jsonb_build_array(n)
          FROM patient_counts WHERE n <> 0
        UNION ALL
        SELECT 'patient_registrations', jsonb_build_array(span, period, dimension, value, spelling), jsonb_build_array(n)
          FROM patient_registrations WHERE n <> 0
    )
    SELECT coalesce(k.rollup, r.rollup), coalesce(k.key, r.key), k.figures, r.figures
      FROM kept k FULL JOIN recount r ON r.rollup = k.rollup AND r.key = k.key
     WHERE k.figures IS DISTINCT FROM r.figures
     ORDER BY 1, 2
$$;
DO $$ BEGIN EXECUTE format('ALTER FUNCTION dashboard_recount_differences() SET search_path = pg_catalog, %I, pg_temp',
                           current_schema()); END $$;
