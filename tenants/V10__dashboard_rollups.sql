-- What the dashboards count, kept per day by statement-level triggers in the writing
-- transaction, so that a range of a year reads a few hundred rows instead of every visit,
-- ticket, posting and patient in it. Each rollup row holds the sum of its keys' live rows:
-- a write adds what its new rows count and takes away what its old rows counted, both
-- netted per key and applied in key order (concurrent writers lock shared rows in one
-- order, so they cannot deadlock on them); a write that changes no counted column touches
-- no rollup row. Rows that reach zero stay. `dashboard_recount_differences()` lists every
-- difference from a recount of the base tables: it must be empty.

-- Visits by their (local) visit date and status.
CREATE TABLE visit_day_counts (
    visit_date date NOT NULL,
    status     text NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (visit_date, status)
);

-- Queue tickets by their (local) queue date and status; the called ones and their waits
-- from arrival to call, in seconds (the average is their sum over their count).
CREATE TABLE queue_day_counts (
    queue_date   date NOT NULL,
    status       text NOT NULL,
    n            bigint NOT NULL,
    waited       bigint NOT NULL,
    wait_seconds numeric NOT NULL,
    PRIMARY KEY (queue_date, status)
);

-- Posted money by transaction date: charges, and payments less refunds.
CREATE TABLE billing_day_totals (
    transaction_date date PRIMARY KEY,
    charges          numeric NOT NULL,
    payments         numeric NOT NULL
);

-- Live patients by what the demographics break them down by: `all` (value ''), `sex`,
-- `civil_status` ('unspecified' for none), `status`, `city` (the trimmed, lowercased key and
-- the trimmed spelling; blanks left out) and `birth_year` (age bands are found at read time:
-- only the eight birth years in which a band's birthday falls need the patients themselves).
CREATE TABLE patient_counts (
    dimension text NOT NULL,
    value     text NOT NULL,
    spelling  text NOT NULL,
    n         bigint NOT NULL,
    PRIMARY KEY (dimension, value, spelling)
);

-- The same per local day (`span` 'd') and local month ('m', its first day) of registration,
-- in the zone `dashboard_zone` names. A branch's zone lives in the registry, which a branch
-- schema may not share a database with: the dashboards compare it with this one on every
-- read and, when they differ, recount these rows in the new zone (`dashboard_rezone`).
CREATE TABLE patient_registrations (
    span      "char" NOT NULL CHECK (span IN ('d', 'm')),
    period    date NOT NULL,
    dimension text NOT NULL,
    value     text NOT NULL,
    spelling  text NOT NULL,
    n         bigint NOT NULL,
    PRIMARY KEY (span, period, dimension, value, spelling)
);

-- NULL until the first dashboard read: registrations are not kept before a zone is known.
CREATE TABLE dashboard_zone (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    timezone text
);
INSERT INTO dashboard_zone DEFAULT VALUES;

-- The age bands' birthdays are found through these without reading the rows.
CREATE INDEX patients_birth_created_idx ON patients (birth_date, created_at) WHERE deleted_at IS NULL;

-- The rows one live patient counts in.
CREATE FUNCTION patient_tally_keys(sex text, civil_status text, status text, city text, birth_date date)
RETURNS TABLE (dimension text, value text, spelling text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT * FROM (VALUES
        ('all', '', ''),
        ('sex', sex, ''),
        ('civil_status', coalesce(civil_status, 'unspecified'), ''),
        ('status', status, ''),
        ('city', nullif(lower(btrim(city)), ''), btrim(city)),
        ('birth_year', extract(year FROM birth_date)::int::text, '')) AS k (dimension, value, spelling)
     WHERE value IS NOT NULL
$$;

-- The (local) day a patient was registered on in `zone`.
CREATE FUNCTION registered_on(created_at timestamptz, zone text) RETURNS date
LANGUAGE sql IMMUTABLE AS $$
    SELECT (created_at AT TIME ZONE zone)::date
$$;

-- Every counted write funnels its netted changes through these, one statement per rollup.
CREATE FUNCTION visit_day_counts_add(changes jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO visit_day_counts AS t (visit_date, status, n)
    SELECT (c->>'visit_date')::date, c->>'status', sum((c->>'d')::bigint)
      FROM jsonb_array_elements(changes) c
     GROUP BY 1, 2 HAVING sum((c->>'d')::bigint) <> 0 ORDER BY 1, 2
    ON CONFLICT (visit_date, status) DO UPDATE SET n = t.n + excluded.n
$$;

CREATE FUNCTION visit_day_counts_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('visit_date', visit_date, 'status', status, 'd', 1))
                      FROM new_rows WHERE deleted_at IS NULL);
    ELSIF TG_OP = 'DELETE' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('visit_date', visit_date, 'status', status, 'd', -1))
                      FROM old_rows WHERE deleted_at IS NULL);
    ELSE
        -- Only rows whose counted columns changed.
        changes := (SELECT jsonb_agg(c) FROM (
                      SELECT jsonb_build_object('visit_date', o.visit_date, 'status', o.status, 'd', -1) AS c
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE o.deleted_at IS NULL
                         AND (n.deleted_at IS NOT NULL OR (n.visit_date, n.status) IS DISTINCT FROM (o.visit_date, o.status))
                      UNION ALL
                      SELECT jsonb_build_object('visit_date', n.visit_date, 'status', n.status, 'd', 1)
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE n.deleted_at IS NULL
                         AND (o.deleted_at IS NOT NULL OR (n.visit_date, n.status) IS DISTINCT FROM (o.visit_date, o.status))) x);
    END IF;
    IF changes IS NOT NULL THEN
        PERFORM visit_day_counts_add(changes);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION queue_wait_seconds(called_at timestamptz, created_at timestamptz) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(extract(epoch FROM called_at - created_at), 0)
$$;

CREATE FUNCTION queue_day_counts_add(changes jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queue_day_counts AS t (queue_date, status, n, waited, wait_seconds)
    SELECT (c->>'queue_date')::date, c->>'status', sum((c->>'d')::bigint),
           sum((c->>'d')::bigint * (c->>'called')::bigint), sum((c->>'d')::bigint * (c->>'wait')::numeric)
      FROM jsonb_array_elements(changes) c
     GROUP BY 1, 2
    HAVING sum((c->>'d')::bigint) <> 0 OR sum((c->>'d')::bigint * (c->>'called')::bigint) <> 0
        OR sum((c->>'d')::bigint * (c->>'wait')::numeric) <> 0
     ORDER BY 1, 2
    ON CONFLICT (queue_date, status) DO UPDATE
       SET n = t.n + excluded.n, waited = t.waited + excluded.waited, wait_seconds = t.wait_seconds + excluded.wait_seconds
$$;

CREATE FUNCTION queue_day_counts_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('queue_date', queue_date, 'status', status, 'd', 1,
                                                        'called', (called_at IS NOT NULL)::int,
                                                        'wait', queue_wait_seconds(called_at, created_at)))
                      FROM new_rows WHERE deleted_at IS NULL);
    ELSIF TG_OP = 'DELETE' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('queue_date', queue_date, 'status', status, 'd', -1,
                                                        'called', (called_at IS NOT NULL)::int,
                                                        'wait', queue_wait_seconds(called_at, created_at)))
                      FROM old_rows WHERE deleted_at IS NULL);
    ELSE
        changes := (SELECT jsonb_agg(c) FROM (
                      SELECT jsonb_build_object('queue_date', o.queue_date, 'status', o.status, 'd', -1,
                                                'called', (o.called_at IS NOT NULL)::int,
                                                'wait', queue_wait_seconds(o.called_at, o.created_at)) AS c
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE o.deleted_at IS NULL
                         AND (n.deleted_at IS NOT NULL OR (n.queue_date, n.status, n.called_at, n.created_at)
                                                          IS DISTINCT FROM (o.queue_date, o.status, o.called_at, o.created_at))
                      UNION ALL
                      SELECT jsonb_build_object('queue_date', n.queue_date, 'status', n.status, 'd', 1,
                                                'called', (n.called_at IS NOT NULL)::int,
                                                'wait', queue_wait_seconds(n.called_at, n.created_at))
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE n.deleted_at IS NULL
                         AND (o.deleted_at IS NOT NULL OR (n.queue_date, n.status, n.called_at, n.created_at)
                                                          IS DISTINCT FROM (o.queue_date, o.status, o.called_at, o.created_at))) x);
    END IF;
    IF changes IS NOT NULL THEN
        PERFORM queue_day_counts_add(changes);
    END IF;
    RETURN NULL;
END
$$;

-- What a posting adds to its day: (charges, payments less refunds); nothing unless posted and live.
CREATE FUNCTION billing_day_amounts(kind text, status text, amount numeric, deleted_at timestamptz,
                                    OUT charges numeric, OUT payments numeric)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN status = 'posted' AND deleted_at IS NULL AND kind = 'charge' THEN amount ELSE 0 END,
           CASE WHEN status <> 'posted' OR deleted_at IS NOT NULL THEN 0
                WHEN kind = 'payment' THEN amount WHEN kind = 'refund' THEN -amount ELSE 0 END
$$;

CREATE FUNCTION billing_day_totals_add(changes jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO billing_day_totals AS t (transaction_date, charges, payments)
    SELECT (c->>'day')::date, sum((c->>'charges')::numeric), sum((c->>'payments')::numeric)
      FROM jsonb_array_elements(changes) c
     GROUP BY 1 HAVING sum((c->>'charges')::numeric) <> 0 OR sum((c->>'payments')::numeric) <> 0 ORDER BY 1
    ON CONFLICT (transaction_date) DO UPDATE
       SET charges = t.charges + excluded.charges, payments = t.payments + excluded.payments
$$;

CREATE FUNCTION billing_day_totals_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jsonb;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('day', transaction_date, 'charges', a.charges, 'payments', a.payments))
                      FROM new_rows, billing_day_amounts(kind, status, amount, deleted_at) a
                     WHERE a.charges <> 0 OR a.payments <> 0);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        changes := coalesce(changes, '[]') || coalesce(
                   (SELECT jsonb_agg(jsonb_build_object('day', transaction_date, 'charges', -a.charges, 'payments', -a.payments))
                      FROM old_rows, billing_day_amounts(kind, status, amount, deleted_at) a
                     WHERE a.charges <> 0 OR a.payments <> 0), '[]');
    END IF;
    IF changes IS NOT NULL AND changes <> '[]' THEN
        PERFORM billing_day_totals_add(changes);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION patient_tallies_add(changes jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    zone text := (SELECT timezone FROM dashboard_zone);
BEGIN
    WITH rows AS (
             SELECT (c->>'d')::bigint AS d, (c->>'created_at')::timestamptz AS created_at, k.*
               FROM jsonb_array_elements(changes) c,
                    patient_tally_keys(c->>'sex', c->>'civil_status', c->>'status', c->>'city', (c->>'birth_date')::date) k),
         kept AS (
             INSERT INTO patient_counts AS t (dimension, value, spelling, n)
             SELECT dimension, value, spelling, sum(d) FROM rows
              GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
             ON CONFLICT (dimension, value, spelling) DO UPDATE SET n = t.n + excluded.n)
    INSERT INTO patient_registrations AS t (span, period, dimension, value, spelling, n)
    SELECT span, period, dimension, value, spelling, sum(d)
      FROM rows, LATERAL (VALUES ('d'::"char", registered_on(created_at, zone)),
                                 ('m'::"char", date_trunc('month', registered_on(created_at, zone))::date)) AS p (span, period)
     WHERE zone IS NOT NULL
     GROUP BY 1, 2, 3, 4, 5 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (span, period, dimension, value, spelling) DO UPDATE SET n = t.n + excluded.n;
END
$$;

CREATE FUNCTION patient_tallies_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changes jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('d', 1, 'created_at', created_at, 'sex', sex, 'civil_status', civil_status,
                                                        'status', status, 'city', city, 'birth_date', birth_date))
                      FROM new_rows WHERE deleted_at IS NULL);
    ELSIF TG_OP = 'DELETE' THEN
        changes := (SELECT jsonb_agg(jsonb_build_object('d', -1, 'created_at', created_at, 'sex', sex, 'civil_status', civil_status,
                                                        'status', status, 'city', city, 'birth_date', birth_date))
                      FROM old_rows WHERE deleted_at IS NULL);
    ELSE
        changes := (SELECT jsonb_agg(c) FROM (
                      SELECT jsonb_build_object('d', -1, 'created_at', o.created_at, 'sex', o.sex, 'civil_status', o.civil_status,
                                                'status', o.status, 'city', o.city, 'birth_date', o.birth_date) AS c
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE o.deleted_at IS NULL
                         AND (n.deleted_at IS NOT NULL
                              OR (n.created_at, n.sex, n.civil_status, n.status, n.city, n.birth_date)
                                 IS DISTINCT FROM (o.created_at, o.sex, o.civil_status, o.status, o.city, o.birth_date))
                      UNION ALL
                      SELECT jsonb_build_object('d', 1, 'created_at', n.created_at, 'sex', n.sex, 'civil_status', n.civil_status,
                                                'status', n.status, 'city', n.city, 'birth_date', n.birth_date)
                        FROM old_rows o JOIN new_rows n USING (id)
                       WHERE n.deleted_at IS NULL
                         AND (o.deleted_at IS NOT NULL
                              OR (n.created_at, n.sex, n.civil_status, n.status, n.city, n.birth_date)
                                 IS DISTINCT FROM (o.created_at, o.sex, o.civil_status, o.status, o.city, o.birth_date))) x);
    END IF;
    IF changes IS NOT NULL THEN
        PERFORM patient_tallies_add(changes);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER visit_day_counts_inserted AFTER INSERT ON patient_visits
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();
CREATE TRIGGER visit_day_counts_updated AFTER UPDATE ON patient_visits
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();
CREATE TRIGGER visit_day_counts_deleted AFTER DELETE ON patient_visits
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();
CREATE TRIGGER queue_day_counts_inserted AFTER INSERT ON queue_tickets
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();
CREATE TRIGGER queue_day_counts_updated AFTER UPDATE ON queue_tickets
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();
CREATE TRIGGER queue_day_counts_deleted AFTER DELETE ON queue_tickets
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();
CREATE TRIGGER billing_day_totals_inserted AFTER INSERT ON billing_transactions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();
CREATE TRIGGER billing_day_totals_updated AFTER UPDATE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();
CREATE TRIGGER billing_day_totals_deleted AFTER DELETE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();
CREATE TRIGGER patient_tallies_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();
CREATE TRIGGER patient_tallies_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();
CREATE TRIGGER patient_tallies_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();

-- The rollups as a recount of the base tables makes them (in the zone of dashboard_zone).
CREATE VIEW dashboard_recount AS
    SELECT 'visit_day_counts' AS rollup, jsonb_build_array(visit_date, status) AS key, jsonb_build_array(count(*)) AS figures
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
    SELECT 'patient_registrations', jsonb_build_array(p.span, p.period, k.dimension, k.value, k.spelling), jsonb_build_array(count(*))
      FROM dashboard_zone z, patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k,
           LATERAL (VALUES ('d'::"char", registered_on(created_at, z.timezone)),
                           ('m'::"char", date_trunc('month', registered_on(created_at, z.timezone))::date)) AS p (span, period)
     WHERE deleted_at IS NULL AND z.timezone IS NOT NULL
     GROUP BY p.span, p.period, k.dimension, k.value, k.spelling;

-- The rollups as they are kept, zero rows left out.
CREATE VIEW dashboard_kept AS
    SELECT 'visit_day_counts' AS rollup, jsonb_build_array(visit_date, status) AS key, jsonb_build_array(n) AS figures
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
      FROM patient_registrations WHERE n <> 0;

-- Every key whose kept figures differ from a recount (either side NULL when it has no row).
-- Numbers compare as numbers (jsonb equality): 1.50 equals 1.5.
CREATE FUNCTION dashboard_recount_differences()
RETURNS TABLE (rollup text, key jsonb, kept jsonb, recounted jsonb)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(k.rollup, r.rollup), coalesce(k.key, r.key), k.figures, r.figures
      FROM dashboard_kept k FULL JOIN dashboard_recount r ON r.rollup = k.rollup AND r.key = k.key
     WHERE k.figures IS DISTINCT FROM r.figures
     ORDER BY 1, 2
$$;

-- Keeps the registrations in `zone` from now on, recounted when it is not theirs yet. Writers
-- of patients wait meanwhile (and the recount waits for running ones), so none is counted in
-- the old zone after it.
CREATE FUNCTION dashboard_rezone(zone text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE patients IN SHARE ROW EXCLUSIVE MODE;
    IF (SELECT timezone FROM dashboard_zone) IS NOT DISTINCT FROM zone THEN
        RETURN;
    END IF;
    DELETE FROM patient_registrations;
    INSERT INTO patient_registrations (span, period, dimension, value, spelling, n)
    SELECT p.span, p.period, k.dimension, k.value, k.spelling, count(*)
      FROM patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k,
           LATERAL (VALUES ('d'::"char", registered_on(created_at, zone)),
                           ('m'::"char", date_trunc('month', registered_on(created_at, zone))::date)) AS p (span, period)
     WHERE deleted_at IS NULL
     GROUP BY 1, 2, 3, 4, 5
     -- In key order, so that a range's rows lie together.
     ORDER BY 1, 2, 3, 4, 5;
    UPDATE dashboard_zone SET timezone = zone;
END
$$;

-- What the rows written so far count.
INSERT INTO visit_day_counts (visit_date, status, n)
SELECT visit_date, status, count(*) FROM patient_visits WHERE deleted_at IS NULL GROUP BY 1, 2;
INSERT INTO queue_day_counts (queue_date, status, n, waited, wait_seconds)
SELECT queue_date, status, count(*), count(called_at), coalesce(sum(queue_wait_seconds(called_at, created_at)), 0)
  FROM queue_tickets WHERE deleted_at IS NULL GROUP BY 1, 2;
INSERT INTO billing_day_totals (transaction_date, charges, payments)
SELECT transaction_date, sum(a.charges), sum(a.payments)
  FROM billing_transactions, billing_day_amounts(kind, status, amount, deleted_at) a
 WHERE status = 'posted' AND deleted_at IS NULL
 GROUP BY 1;
INSERT INTO patient_counts (dimension, value, spelling, n)
SELECT k.dimension, k.value, k.spelling, count(*)
  FROM patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k
 WHERE deleted_at IS NULL GROUP BY 1, 2, 3;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'patient_tally_keys(text, text, text, text, date)', 'registered_on(timestamptz, text)',
        'visit_day_counts_add(jsonb)', 'visit_day_counts_changed()', 'queue_wait_seconds(timestamptz, timestamptz)',
        'queue_day_counts_add(jsonb)', 'queue_day_counts_changed()', 'billing_day_amounts(text, text, numeric, timestamptz)',
        'billing_day_totals_add(jsonb)', 'billing_day_totals_changed()', 'patient_tallies_add(jsonb)',
        'patient_tallies_changed()', 'dashboard_recount_differences()', 'dashboard_rezone(text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn, current_schema());
    END LOOP;
END
$$;
