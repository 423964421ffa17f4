-- A branch schema as the tenant migrations V1 to V34 leave it, in one script: what a new
-- branch's schema is built from (`db::migrate::build_batch`), with every later migration run
-- after it. Written by ops/branch_schema/write.sh from pg_dump of a replayed schema; do not
-- edit by hand. `tests/api/tenancy/catalogue.rs` checks that it builds the replayed schema.
-- version: 34
SET LOCAL check_function_bodies = false;

CREATE FUNCTION audit_log_add_months(ahead integer) RETURNS integer
    LANGUAGE plpgsql
    SET "DateStyle" TO 'ISO, MDY'
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $_$
DECLARE
    log regclass := 'audit_log'::regclass;
    home text := (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = log);
    -- Months are counted on UTC's calendar (in `timestamp`: a month added to a `timestamptz`
    -- follows the session's time zone, and its daylight saving time).
    first timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    month timestamp;
    made integer := 0;
BEGIN
    FOR month IN
        SELECT m FROM generate_series(first, first + ahead * interval '1 month', interval '1 month') AS m
         WHERE NOT EXISTS (
             -- A range partition whose bounds hold the month's first moment. Bounds read as
             -- `FOR VALUES FROM (...) TO (...)`; the default partition has none.
             SELECT 1
               FROM pg_inherits i
               JOIN pg_class c ON c.oid = i.inhrelid
              CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                              '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS b(v)
              WHERE i.inhparent = log
                AND (b.v[1] = 'MINVALUE' OR btrim(b.v[1], '''')::timestamptz <= m AT TIME ZONE 'UTC')
                AND (b.v[2] = 'MAXVALUE' OR btrim(b.v[2], '''')::timestamptz > m AT TIME ZONE 'UTC'))
    LOOP
        BEGIN
            EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)', home,
                           'audit_log_y' || to_char(month, 'YYYY"m"MM'), log,
                           month AT TIME ZONE 'UTC', (month + interval '1 month') AT TIME ZONE 'UTC');
            made := made + 1;
        EXCEPTION WHEN invalid_object_definition THEN
            NULL; -- a partition holds part of this month
        END;
    END LOOP;
    RETURN made;
END
$_$;

CREATE FUNCTION audit_log_chain() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    -- The lanes' advisory locks, keyed by this log's head table.
    head_key integer := 'audit_chain_head'::regclass::oid::integer;
    lanes constant integer := 32;
    chosen integer;
BEGIN
    IF current_setting('clinic.audit_chain', true) IS DISTINCT FROM 'on' THEN
        NEW.chain_lane := NULL;
        NEW.chain_position := NULL;
        NEW.chain_hash := NULL;
        RETURN NEW;
    END IF;
    FOR lane IN 0..lanes - 1 LOOP
        IF pg_try_advisory_xact_lock(head_key, lane) THEN
            chosen := lane;
            EXIT;
        END IF;
    END LOOP;
    IF chosen IS NULL THEN
        chosen := floor(random() * lanes);
        PERFORM pg_advisory_xact_lock(head_key, chosen);
    END IF;
    UPDATE audit_chain_head h
       SET last_position = h.last_position + 1,
           last_hash = sha256(h.last_hash || convert_to(jsonb_build_array(
               h.lane, h.last_position + 1, NEW.id, to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
               NEW.user_id, NEW.action, NEW.resource, NEW.record_id, NEW.before, NEW.after, NEW.route)::text,
               'UTF8'))
     WHERE h.lane = chosen
    RETURNING h.lane, h.last_position, h.last_hash INTO NEW.chain_lane, NEW.chain_position, NEW.chain_hash;
    RETURN NEW;
END
$$;

CREATE FUNCTION billing_balance_of(kind text, status text, amount numeric, deleted_at timestamp with time zone) RETURNS numeric
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT CASE WHEN status <> 'posted' OR deleted_at IS NOT NULL THEN 0
                WHEN kind IN ('charge', 'refund') THEN amount
                ELSE -amount END
$$;

CREATE FUNCTION billing_day_amounts(kind text, status text, amount numeric, deleted_at timestamp with time zone, OUT charges numeric, OUT payments numeric) RETURNS record
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT CASE WHEN status = 'posted' AND deleted_at IS NULL AND kind = 'charge' THEN amount ELSE 0 END,
           CASE WHEN status <> 'posted' OR deleted_at IS NOT NULL THEN 0
                WHEN kind = 'payment' THEN amount WHEN kind = 'refund' THEN -amount ELSE 0 END
$$;

CREATE FUNCTION billing_day_totals_add(changes jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    INSERT INTO billing_day_totals AS t (transaction_date, charges, payments)
    SELECT (c->>'day')::date, sum((c->>'charges')::numeric), sum((c->>'payments')::numeric)
      FROM jsonb_array_elements(changes) c
     GROUP BY 1 HAVING sum((c->>'charges')::numeric) <> 0 OR sum((c->>'payments')::numeric) <> 0 ORDER BY 1
    ON CONFLICT (transaction_date) DO UPDATE
       SET charges = t.charges + excluded.charges, payments = t.payments + excluded.payments
$$;

CREATE FUNCTION billing_day_totals_changed() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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

CREATE FUNCTION billing_totals_changed() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    delta numeric := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        delta := delta + (SELECT coalesce(sum(billing_balance_of(kind, status, amount, deleted_at)), 0) FROM new_rows);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        delta := delta - (SELECT coalesce(sum(billing_balance_of(kind, status, amount, deleted_at)), 0) FROM old_rows);
    END IF;
    IF delta <> 0 THEN
        UPDATE billing_totals SET outstanding = outstanding + delta;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_deleted_rows() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    delta bigint := (SELECT count(*) FROM old_rows WHERE deleted_at IS NULL);
BEGIN
    IF delta <> 0 THEN
        UPDATE row_counts SET live = live - delta WHERE table_name = TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_inserted_rows() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    delta bigint := (SELECT count(*) FROM new_rows WHERE deleted_at IS NULL);
BEGIN
    IF delta <> 0 THEN
        UPDATE row_counts SET live = live + delta WHERE table_name = TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_updated_rows() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    delta bigint := (SELECT count(*) FILTER (WHERE n.deleted_at IS NULL) - count(*) FILTER (WHERE o.deleted_at IS NULL)
                       FROM old_rows o JOIN new_rows n ON n.id = o.id);
BEGIN
    IF delta <> 0 THEN
        UPDATE row_counts SET live = live + delta WHERE table_name = TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION dashboard_recount_differences() RETURNS TABLE(rollup text, key jsonb, kept jsonb, recounted jsonb)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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
          FROM branch_info z, patients, patient_tally_keys(sex, civil_status, status, city, birth_date) k,
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

CREATE FUNCTION dashboard_rezone(zone text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
BEGIN
    LOCK TABLE patients IN SHARE ROW EXCLUSIVE MODE;
    IF (SELECT timezone FROM branch_info) IS NOT DISTINCT FROM zone THEN
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
    UPDATE branch_info SET timezone = zone;
END
$$;

CREATE FUNCTION next_patient_pin() RETURNS text
    LANGUAGE sql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT (SELECT code FROM branch_info) || '-' || lpad(nextval('patient_pin_seq')::text, 6, '0')
$$;

CREATE FUNCTION pair_likely_duplicates(dirty bigint[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
BEGIN
    -- With the live patients sharing a key with them: a group that grew past the limit
    -- loses its pairs.
    WITH d AS MATERIALIZED (
        SELECT birth_date, duplicate_name, duplicate_phone, duplicate_member
          FROM patients WHERE id = ANY(dirty) AND deleted_at IS NULL
    )
    SELECT array_agg(DISTINCT id) INTO dirty FROM (
        SELECT unnest(dirty) AS id
        UNION ALL
        SELECT p.id FROM d JOIN patients p
            ON p.duplicate_name = d.duplicate_name AND p.birth_date = d.birth_date AND p.deleted_at IS NULL
        UNION ALL
        SELECT p.id FROM d JOIN patients p ON p.duplicate_phone = d.duplicate_phone AND p.deleted_at IS NULL
        UNION ALL
        SELECT p.id FROM d JOIN patients p ON p.duplicate_member = d.duplicate_member AND p.deleted_at IS NULL
    ) grouped;
    DELETE FROM patient_duplicate_pairs WHERE older_id = ANY(dirty);
    DELETE FROM patient_duplicate_pairs WHERE newer_id = ANY(dirty);
    INSERT INTO patient_duplicate_pairs (older_id, newer_id, reasons)
    WITH d AS MATERIALIZED (
        SELECT id, birth_date, duplicate_name, duplicate_phone, duplicate_member
          FROM patients WHERE id = ANY(dirty) AND deleted_at IS NULL
    ), found AS (
        SELECT a, b, reason FROM (
            SELECT d.id AS a, o.id AS b, 'same_name_and_birth_date' AS reason, count(*) OVER (PARTITION BY d.id) AS others
              FROM d JOIN patients o
                ON o.duplicate_name = d.duplicate_name AND o.birth_date = d.birth_date
               AND o.deleted_at IS NULL AND o.id <> d.id
            UNION ALL
            SELECT d.id, o.id, 'same_phone', count(*) OVER (PARTITION BY d.id)
              FROM d JOIN patients o ON o.duplicate_phone = d.duplicate_phone AND o.deleted_at IS NULL AND o.id <> d.id
            UNION ALL
            SELECT d.id, o.id, 'same_insurance_member_no', count(*) OVER (PARTITION BY d.id)
              FROM d JOIN patients o ON o.duplicate_member = d.duplicate_member AND o.deleted_at IS NULL AND o.id <> d.id
        ) shared
         WHERE others < 10
        UNION ALL
        SELECT d.id, o.id, 'similar_name_and_birth_date'
          FROM d JOIN patients o ON o.birth_date = d.birth_date AND o.deleted_at IS NULL AND o.id <> d.id
         WHERE public.levenshtein_less_equal(left(d.duplicate_name, 255), left(o.duplicate_name, 255), 1) = 1
    )
    SELECT least(a, b), greatest(a, b), array_agg(DISTINCT reason ORDER BY reason)
      FROM found GROUP BY 1, 2
    ON CONFLICT (older_id, newer_id) DO NOTHING;
END
$$;

CREATE FUNCTION pair_queued_duplicates(ids bigint[], lo bigint, hi bigint, deadline timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    half integer := cardinality(ids) / 2;
BEGIN
    IF clock_timestamp() > deadline THEN
        RETURN;
    END IF;
    DELETE FROM patient_duplicate_checks WHERE seq > lo AND seq <= hi AND subject_id = ANY(ids);
    PERFORM pair_likely_duplicates(ids);
EXCEPTION WHEN OTHERS THEN
    IF SQLSTATE IN ('40001', '40P01') THEN
        RAISE;
    END IF;
    IF half = 0 THEN
        RAISE WARNING 'likely duplicates of patient % not found (SQLSTATE %); it stays queued', ids[1], SQLSTATE;
    ELSE
        PERFORM pair_queued_duplicates(ids[1:half], lo, hi, deadline);
        PERFORM pair_queued_duplicates(ids[half + 1:], lo, hi, deadline);
    END IF;
END
$$;

CREATE FUNCTION patient_prefixes(first_name text, middle_name text, last_name text, suffix text, pin text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT array_to_tsvector(ARRAY(
        SELECT DISTINCT left(word, n)
          FROM unnest(regexp_split_to_array(search_normalize(
                   first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name || ' '
                   || coalesce(suffix, '') || ' ' || split_part(pin, '-', 2) || ' '
                   || ltrim(split_part(pin, '-', 2), '0')), '\W+')) AS word,
               generate_series(1, least(length(word), 20)) AS n
         WHERE word <> ''))
$$;

CREATE FUNCTION patient_search_follow() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.deleted_at IS NOT NULL THEN
        DELETE FROM patient_search WHERE id = OLD.id;
        RETURN NULL;
    END IF;
    INSERT INTO patient_search (id, search_text, last_name, first_name, middle_name, suffix, pin, birth_date,
                                created_at)
    VALUES (NEW.id, NEW.search_text, NEW.last_name, NEW.first_name, NEW.middle_name, NEW.suffix, NEW.pin,
            NEW.birth_date, NEW.created_at)
    ON CONFLICT (id) DO UPDATE
       SET (search_text, last_name, first_name, middle_name, suffix, pin, birth_date, created_at)
         = (EXCLUDED.search_text, EXCLUDED.last_name, EXCLUDED.first_name, EXCLUDED.middle_name,
            EXCLUDED.suffix, EXCLUDED.pin, EXCLUDED.birth_date, EXCLUDED.created_at);
    RETURN NULL;
END
$$;

CREATE FUNCTION patient_search_put_in_name_order(min_rows bigint, below real) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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

CREATE FUNCTION patient_tallies_add(changes jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    zone text := (SELECT timezone FROM branch_info);
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
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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

CREATE FUNCTION patient_tally_keys(sex text, civil_status text, status text, city text, birth_date date) RETURNS TABLE(dimension text, value text, spelling text)
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT * FROM (VALUES
        ('all', '', ''),
        ('sex', sex, ''),
        ('civil_status', coalesce(civil_status, 'unspecified'), ''),
        ('status', status, ''),
        ('city', nullif(lower(btrim(city)), ''), btrim(city)),
        ('birth_year', extract(year FROM birth_date)::int::text, '')) AS k (dimension, value, spelling)
     WHERE value IS NOT NULL
$$;

CREATE FUNCTION queue_day_counts_add(changes jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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

CREATE FUNCTION queue_duplicate_checks() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO patient_duplicate_checks (subject_id) SELECT id FROM new_rows;
    ELSIF TG_OP = 'UPDATE' THEN
        -- Only rows whose keys changed, or whether they are live.
        PERFORM queue_duplicate_checks_of(array_agg(o.id), array_agg(o.duplicate_name), array_agg(o.birth_date),
                                          array_agg(o.duplicate_phone), array_agg(o.duplicate_member))
          FROM new_rows n JOIN old_rows o USING (id)
         WHERE (n.duplicate_name, n.birth_date, n.duplicate_phone, n.duplicate_member, n.deleted_at IS NULL)
               IS DISTINCT FROM (o.duplicate_name, o.birth_date, o.duplicate_phone, o.duplicate_member, o.deleted_at IS NULL);
    ELSE
        PERFORM queue_duplicate_checks_of(array_agg(id), array_agg(duplicate_name), array_agg(birth_date),
                                          array_agg(duplicate_phone), array_agg(duplicate_member))
          FROM old_rows;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION queue_duplicate_checks_of(ids bigint[], names text[], births date[], phones text[], members text[]) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    INSERT INTO patient_duplicate_checks (subject_id)
    SELECT unnest(ids)
    UNION
    SELECT p.id FROM unnest(names, births) k (name_key, birth_date) JOIN patients p
        ON p.duplicate_name = k.name_key AND p.birth_date = k.birth_date AND p.deleted_at IS NULL
    UNION
    SELECT p.id FROM unnest(phones) k (phone_key) JOIN patients p
        ON p.duplicate_phone = k.phone_key AND p.deleted_at IS NULL
    UNION
    SELECT p.id FROM unnest(members) k (member_key) JOIN patients p
        ON p.duplicate_member = k.member_key AND p.deleted_at IS NULL
$$;

CREATE FUNCTION queue_wait_seconds(called_at timestamp with time zone, created_at timestamp with time zone) RETURNS numeric
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT coalesce(extract(epoch FROM called_at - created_at), 0)
$$;

CREATE FUNCTION refresh_patient_duplicates() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    top bigint;
    after bigint := 0;
    upto bigint;
    batch bigint[];
    deadline timestamptz :=
        clock_timestamp() + nullif(current_setting('statement_timeout')::interval, interval '0') / 2;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM patient_duplicate_checks) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock('patient_duplicate_pairs'::regclass::oid::bigint);
    -- What is queued now; a row committed after this waits for the next read.
    SELECT max(seq) INTO top FROM patient_duplicate_checks;
    LOOP
        SELECT max(seq), array_agg(DISTINCT subject_id) INTO upto, batch
          FROM (SELECT seq, subject_id FROM patient_duplicate_checks
                 WHERE seq > after AND seq <= top ORDER BY seq LIMIT 200000) taken;
        EXIT WHEN upto IS NULL OR clock_timestamp() > deadline;
        PERFORM pair_queued_duplicates(batch, after, upto, deadline);
        after := upto;
    END LOOP;
END
$$;

CREATE FUNCTION refuse_merged_patient() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
DECLARE
    survivor bigint;
BEGIN
    IF NEW.patient_id IS NULL OR (TG_OP = 'UPDATE' AND NEW.patient_id IS NOT DISTINCT FROM OLD.patient_id) THEN
        RETURN NEW;
    END IF;
    SELECT merged_into_id INTO survivor FROM patients WHERE id = NEW.patient_id FOR KEY SHARE;
    IF survivor IS NOT NULL THEN
        RAISE EXCEPTION 'patient % was merged into patient %', NEW.patient_id, survivor
            USING ERRCODE = 'MG410', DETAIL = survivor::text;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION registered_on(created_at timestamp with time zone, zone text) RETURNS date
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    SELECT (created_at AT TIME ZONE zone)::date
$$;

CREATE FUNCTION search_normalize(text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $_$
    SELECT lower(public.unaccent('public.unaccent'::regdictionary, $1))
$_$;

CREATE FUNCTION visit_day_counts_add(changes jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
    INSERT INTO visit_day_counts AS t (visit_date, status, n)
    SELECT (c->>'visit_date')::date, c->>'status', sum((c->>'d')::bigint)
      FROM jsonb_array_elements(changes) c
     GROUP BY 1, 2 HAVING sum((c->>'d')::bigint) <> 0 ORDER BY 1, 2
    ON CONFLICT (visit_date, status) DO UPDATE SET n = t.n + excluded.n
$$;

CREATE FUNCTION visit_day_counts_changed() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', '@schema@', 'pg_temp'
    AS $$
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

CREATE SEQUENCE row_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE SEQUENCE patient_pin_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE patients (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    pin text DEFAULT next_patient_pin() NOT NULL,
    first_name text NOT NULL,
    middle_name text,
    last_name text NOT NULL,
    suffix text,
    birth_date date NOT NULL,
    sex text NOT NULL,
    civil_status text,
    status text DEFAULT 'active'::text NOT NULL,
    phone text,
    email text,
    address_line text,
    city text,
    province text,
    postal_code text,
    country text,
    occupation text,
    emergency_contact_name text,
    emergency_contact_relation text,
    emergency_contact_phone text,
    insurance_id bigint,
    insurance_member_no text,
    notes text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    search_text text GENERATED ALWAYS AS (search_normalize(((((((((first_name || ' '::text) || COALESCE(middle_name, ''::text)) || ' '::text) || last_name) || ' '::text) || COALESCE(suffix, ''::text)) || ' '::text) || pin))) STORED,
    phone_digits text GENERATED ALWAYS AS (regexp_replace(phone, '[^0-9]'::text, ''::text, 'g'::text)) STORED,
    merged_into_id bigint,
    duplicate_name text GENERATED ALWAYS AS (regexp_replace(search_normalize(((first_name || '|'::text) || last_name)), '[^[:alnum:]|]+'::text, ''::text, 'g'::text)) STORED,
    duplicate_phone text GENERATED ALWAYS AS (
CASE
    WHEN ((length(regexp_replace(phone, '[^0-9]'::text, ''::text, 'g'::text)) >= 7) AND (regexp_replace(phone, '[^0-9]'::text, ''::text, 'g'::text) !~ '^(.)\1*$'::text)) THEN "right"(regexp_replace(phone, '[^0-9]'::text, ''::text, 'g'::text), 10)
    ELSE NULL::text
END) STORED,
    duplicate_member text GENERATED ALWAYS AS (
CASE
    WHEN (upper(regexp_replace(insurance_member_no, '[^[:alnum:]]+'::text, ''::text, 'g'::text)) <> ''::text) THEN ((insurance_id || ':'::text) || upper(regexp_replace(insurance_member_no, '[^[:alnum:]]+'::text, ''::text, 'g'::text)))
    ELSE NULL::text
END) STORED,
    reminders_opt_out boolean DEFAULT false NOT NULL,
    CONSTRAINT patients_pin_key UNIQUE (pin),
    CONSTRAINT patients_pkey PRIMARY KEY (id),
    CONSTRAINT patients_merged_into_id_fkey FOREIGN KEY (merged_into_id) REFERENCES patients(id)
);

CREATE TABLE allergies (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    medicine_id bigint,
    substance text,
    reaction text,
    severity text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    noted_on date,
    notes text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT allergies_check CHECK (((medicine_id IS NOT NULL) OR (btrim(substance) <> ''::text))),
    CONSTRAINT allergies_severity_check CHECK ((severity = ANY (ARRAY['mild'::text, 'moderate'::text, 'severe'::text]))),
    CONSTRAINT allergies_status_check CHECK ((status = ANY (ARRAY['active'::text, 'inactive'::text, 'resolved'::text]))),
    CONSTRAINT allergies_pkey PRIMARY KEY (id),
    CONSTRAINT allergies_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id)
);

CREATE TABLE patient_visits (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    visit_date date NOT NULL,
    visit_type text,
    doctor_id bigint,
    reason text,
    status text DEFAULT 'scheduled'::text NOT NULL,
    notes text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT patient_visits_pkey PRIMARY KEY (id),
    CONSTRAINT patient_visits_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id)
);

CREATE TABLE queue_tickets (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    number text NOT NULL,
    "position" integer NOT NULL,
    branch_service_id bigint NOT NULL,
    patient_id bigint,
    patient_visit_id bigint,
    priority text DEFAULT 'normal'::text NOT NULL,
    status text DEFAULT 'waiting'::text NOT NULL,
    counter text,
    call_count integer DEFAULT 0 NOT NULL,
    queue_date date NOT NULL,
    called_at timestamp with time zone,
    serving_at timestamp with time zone,
    completed_at timestamp with time zone,
    transferred_from_id bigint,
    transferred_to_id bigint,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT queue_tickets_priority_check CHECK ((priority = ANY (ARRAY['normal'::text, 'priority'::text, 'urgent'::text]))),
    CONSTRAINT queue_tickets_day_service_position_key UNIQUE (queue_date, branch_service_id, "position"),
    CONSTRAINT queue_tickets_pkey PRIMARY KEY (id),
    CONSTRAINT queue_tickets_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT queue_tickets_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id),
    CONSTRAINT queue_tickets_transferred_from_id_fkey FOREIGN KEY (transferred_from_id) REFERENCES queue_tickets(id),
    CONSTRAINT queue_tickets_transferred_to_id_fkey FOREIGN KEY (transferred_to_id) REFERENCES queue_tickets(id)
);

CREATE TABLE recalls (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    due_on date NOT NULL,
    reason text NOT NULL,
    doctor_id bigint,
    branch_service_id bigint,
    patient_visit_id bigint,
    status text DEFAULT 'pending'::text NOT NULL,
    notes text,
    cancelled_at timestamp with time zone,
    cancel_reason text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT recalls_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'booked'::text, 'done'::text, 'cancelled'::text]))),
    CONSTRAINT recalls_pkey PRIMARY KEY (id),
    CONSTRAINT recalls_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT recalls_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE appointments (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    doctor_id bigint NOT NULL,
    branch_service_id bigint NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    duration_minutes integer NOT NULL,
    reason text,
    notes text,
    overbooked boolean DEFAULT false NOT NULL,
    overbook_reason text,
    status text DEFAULT 'booked'::text NOT NULL,
    arrived_at timestamp with time zone,
    started_at timestamp with time zone,
    completed_at timestamp with time zone,
    cancelled_at timestamp with time zone,
    cancelled_by bigint,
    cancel_reason text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    recall_id bigint,
    patient_visit_id bigint,
    queue_ticket_id bigint,
    CONSTRAINT appointments_check CHECK ((ends_at > starts_at)),
    CONSTRAINT appointments_check1 CHECK (((NOT overbooked) OR (btrim(overbook_reason) <> ''::text))),
    CONSTRAINT appointments_duration_minutes_check CHECK (((duration_minutes >= 5) AND (duration_minutes <= 720))),
    CONSTRAINT appointments_status_check CHECK ((status = ANY (ARRAY['booked'::text, 'arrived'::text, 'in_progress'::text, 'completed'::text, 'cancelled'::text, 'no_show'::text]))),
    CONSTRAINT appointments_doctor_overlap EXCLUDE USING gist (doctor_id WITH =, tstzrange(starts_at, ends_at) WITH &&) WHERE (((status = ANY (ARRAY['booked'::text, 'arrived'::text, 'in_progress'::text])) AND (NOT overbooked) AND (deleted_at IS NULL))) DEFERRABLE,
    CONSTRAINT appointments_pkey PRIMARY KEY (id),
    CONSTRAINT appointments_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT appointments_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id),
    CONSTRAINT appointments_queue_ticket_id_fkey FOREIGN KEY (queue_ticket_id) REFERENCES queue_tickets(id),
    CONSTRAINT appointments_recall_id_fkey FOREIGN KEY (recall_id) REFERENCES recalls(id)
);

CREATE TABLE appointment_reminders (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    appointment_id bigint NOT NULL,
    due_at timestamp with time zone NOT NULL,
    channel text DEFAULT 'email'::text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    reason text,
    sent_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT appointment_reminders_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT appointment_reminders_channel_check CHECK ((channel = 'email'::text)),
    CONSTRAINT appointment_reminders_check CHECK (((status = 'sent'::text) = (sent_at IS NOT NULL))),
    CONSTRAINT appointment_reminders_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text, 'withdrawn'::text]))),
    CONSTRAINT appointment_reminders_pkey PRIMARY KEY (id),
    CONSTRAINT appointment_reminders_appointment_id_fkey FOREIGN KEY (appointment_id) REFERENCES appointments(id)
);

CREATE TABLE attachment_blobs (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    sha256 text NOT NULL,
    bytes bigint NOT NULL,
    store_key text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT attachment_blobs_bytes_check CHECK ((bytes > 0)),
    CONSTRAINT attachment_blobs_sha256_check CHECK ((sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT attachment_blobs_pkey PRIMARY KEY (id),
    CONSTRAINT attachment_blobs_sha256_key UNIQUE (sha256)
);

CREATE TABLE attachment_chunks (
    blob_id bigint NOT NULL,
    seq integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT attachment_chunks_seq_check CHECK ((seq >= 0)),
    CONSTRAINT attachment_chunks_pkey PRIMARY KEY (blob_id, seq),
    CONSTRAINT attachment_chunks_blob_id_fkey FOREIGN KEY (blob_id) REFERENCES attachment_blobs(id)
);

ALTER TABLE ONLY attachment_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE attachments (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    visit_id bigint,
    examination_kind text,
    examination_id bigint,
    blob_id bigint NOT NULL,
    kind text NOT NULL,
    content_type text NOT NULL,
    bytes bigint NOT NULL,
    sha256 text NOT NULL,
    filename text NOT NULL,
    title text,
    delete_reason text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT attachments_check CHECK (((examination_kind IS NULL) = (examination_id IS NULL))),
    CONSTRAINT attachments_check1 CHECK (((deleted_at IS NULL) = (delete_reason IS NULL))),
    CONSTRAINT attachments_kind_check CHECK ((kind = ANY (ARRAY['pdf'::text, 'jpeg'::text, 'png'::text, 'tiff'::text, 'dicom'::text]))),
    CONSTRAINT attachments_pkey PRIMARY KEY (id),
    CONSTRAINT attachments_blob_id_fkey FOREIGN KEY (blob_id) REFERENCES attachment_blobs(id),
    CONSTRAINT attachments_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT attachments_visit_id_fkey FOREIGN KEY (visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE audit_chain_head (
    lane smallint NOT NULL,
    last_position bigint NOT NULL,
    last_hash bytea NOT NULL,
    CONSTRAINT audit_chain_head_pkey PRIMARY KEY (lane)
);

CREATE TABLE audit_log (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    user_id bigint,
    action text NOT NULL,
    resource text NOT NULL,
    record_id bigint,
    before jsonb,
    after jsonb,
    route text,
    chain_lane smallint,
    chain_position bigint,
    chain_hash bytea
)
PARTITION BY RANGE (at);

CREATE TABLE audit_log_archived (
    lane smallint NOT NULL,
    first_position bigint NOT NULL,
    last_position bigint NOT NULL,
    records bigint NOT NULL,
    last_hash bytea NOT NULL,
    month text NOT NULL,
    archived_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT audit_log_archived_pkey PRIMARY KEY (lane, first_position)
);

CREATE TABLE audit_log_until_partitioned (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    user_id bigint,
    action text NOT NULL,
    resource text NOT NULL,
    record_id bigint,
    before jsonb,
    after jsonb,
    route text,
    chain_lane smallint,
    chain_position bigint,
    chain_hash bytea
);

CREATE TABLE billing_day_totals (
    transaction_date date NOT NULL,
    charges numeric NOT NULL,
    payments numeric NOT NULL,
    CONSTRAINT billing_day_totals_pkey PRIMARY KEY (transaction_date)
);

CREATE TABLE billing_totals (
    one boolean DEFAULT true NOT NULL,
    outstanding numeric DEFAULT 0 NOT NULL,
    CONSTRAINT billing_totals_one_check CHECK (one),
    CONSTRAINT billing_totals_pkey PRIMARY KEY (one)
);

CREATE TABLE billing_transactions (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    number text NOT NULL,
    patient_id bigint NOT NULL,
    kind text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    description text,
    bill_item_id bigint,
    procedure_id bigint,
    service_id bigint,
    quantity numeric(12,3),
    unit_price numeric(12,2),
    amount numeric(12,2) NOT NULL,
    payment_method_id bigint,
    reference text,
    patient_visit_id bigint,
    insurance_id bigint,
    covered_amount numeric(12,2),
    transaction_date date NOT NULL,
    posted_at timestamp with time zone,
    voided_at timestamp with time zone,
    void_reason text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT billing_transactions_amount_check CHECK ((amount > (0)::numeric)),
    CONSTRAINT billing_transactions_check CHECK (((covered_amount >= (0)::numeric) AND (covered_amount <= amount))),
    CONSTRAINT billing_transactions_kind_check CHECK ((kind = ANY (ARRAY['charge'::text, 'discount'::text, 'payment'::text, 'refund'::text]))),
    CONSTRAINT billing_transactions_quantity_check CHECK ((quantity > (0)::numeric)),
    CONSTRAINT billing_transactions_status_check CHECK ((status = ANY (ARRAY['open'::text, 'posted'::text, 'voided'::text]))),
    CONSTRAINT billing_transactions_unit_price_check CHECK ((unit_price >= (0)::numeric)),
    CONSTRAINT billing_transactions_number_key UNIQUE (number),
    CONSTRAINT billing_transactions_pkey PRIMARY KEY (id),
    CONSTRAINT billing_transactions_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT billing_transactions_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE branch_info (
    singleton boolean DEFAULT true NOT NULL,
    branch_id bigint NOT NULL,
    code text NOT NULL,
    timezone text,
    CONSTRAINT branch_info_singleton_check CHECK (singleton),
    CONSTRAINT branch_info_pkey PRIMARY KEY (singleton)
);

CREATE TABLE complaints (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    patient_visit_id bigint NOT NULL,
    complaint text NOT NULL,
    eye text,
    onset text,
    duration text,
    severity text,
    notes text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT complaints_pkey PRIMARY KEY (id),
    CONSTRAINT complaints_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT complaints_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE doctor_schedules (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    doctor_id bigint NOT NULL,
    weekday integer NOT NULL,
    start_time text NOT NULL,
    end_time text NOT NULL,
    slot_minutes integer DEFAULT 15 NOT NULL,
    effective_from date,
    effective_to date,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT doctor_schedules_check CHECK ((end_time > start_time)),
    CONSTRAINT doctor_schedules_check1 CHECK ((effective_to >= effective_from)),
    CONSTRAINT doctor_schedules_end_time_check CHECK ((end_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'::text)),
    CONSTRAINT doctor_schedules_slot_minutes_check CHECK (((slot_minutes >= 5) AND (slot_minutes <= 480))),
    CONSTRAINT doctor_schedules_start_time_check CHECK ((start_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'::text)),
    CONSTRAINT doctor_schedules_weekday_check CHECK (((weekday >= 1) AND (weekday <= 7))),
    CONSTRAINT doctor_schedules_overlap EXCLUDE USING gist (doctor_id WITH =, weekday WITH =, int4range((((split_part(start_time, ':'::text, 1))::integer * 60) + (split_part(start_time, ':'::text, 2))::integer), (((split_part(end_time, ':'::text, 1))::integer * 60) + (split_part(end_time, ':'::text, 2))::integer)) WITH &&, daterange(effective_from, effective_to, '[]'::text) WITH &&) WHERE ((deleted_at IS NULL)) DEFERRABLE,
    CONSTRAINT doctor_schedules_pkey PRIMARY KEY (id)
);

CREATE TABLE document_counters (
    series text NOT NULL,
    year integer NOT NULL,
    last bigint NOT NULL,
    CONSTRAINT document_counters_pkey PRIMARY KEY (series, year)
);

CREATE TABLE examinations (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    exam text NOT NULL,
    patient_id bigint NOT NULL,
    patient_visit_id bigint NOT NULL,
    examined_at timestamp with time zone DEFAULT now() NOT NULL,
    examiner_id bigint NOT NULL,
    notes text,
    status text DEFAULT 'draft'::text NOT NULL,
    signed_by bigint,
    signed_at timestamp with time zone,
    amendment_reason text,
    amended_by bigint,
    amended_at timestamp with time zone,
    right_eye jsonb,
    left_eye jsonb,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    distance text,
    correction text,
    notation text,
    kind text,
    dilated boolean DEFAULT false,
    device text,
    deviation text,
    deviation_pd integer,
    diplopia boolean,
    nystagmus boolean,
    base_mm integer,
    instrument text,
    studies jsonb,
    CONSTRAINT examinations_check CHECK (((status = 'signed'::text) = (signed_at IS NOT NULL))),
    CONSTRAINT examinations_exam_check CHECK ((exam = ANY (ARRAY['visual_acuity'::text, 'refraction'::text, 'tonometry'::text, 'slit_lamp'::text, 'funduscopy'::text, 'gonioscopy'::text, 'corneal_topography'::text, 'amsler_grid'::text, 'eom'::text, 'exophthalmometry'::text, 'lacrimal_irrigation'::text, 'radiology'::text, 'gross_examination'::text, 'indirect_ophthalmoscopy'::text]))),
    CONSTRAINT examinations_left_eye_check CHECK ((jsonb_typeof(left_eye) = 'object'::text)),
    CONSTRAINT examinations_own_required CHECK (
CASE exam
    WHEN 'visual_acuity'::text THEN ((distance IS NOT NULL) AND (correction IS NOT NULL) AND (notation IS NOT NULL))
    WHEN 'refraction'::text THEN (kind IS NOT NULL)
    WHEN 'funduscopy'::text THEN (dilated IS NOT NULL)
    WHEN 'exophthalmometry'::text THEN (base_mm IS NOT NULL)
    WHEN 'radiology'::text THEN (studies IS NOT NULL)
    ELSE true
END),
    CONSTRAINT examinations_right_eye_check CHECK ((jsonb_typeof(right_eye) = 'object'::text)),
    CONSTRAINT examinations_status_check CHECK ((status = ANY (ARRAY['draft'::text, 'signed'::text]))),
    CONSTRAINT examinations_studies_check CHECK ((jsonb_typeof(studies) = 'array'::text)),
    CONSTRAINT examinations_pkey PRIMARY KEY (id),
    CONSTRAINT examinations_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT examinations_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE idempotency_keys (
    user_id bigint NOT NULL,
    path text NOT NULL,
    key text NOT NULL,
    fingerprint bytea NOT NULL,
    status integer,
    response jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, path, key)
);

CREATE TABLE medical_certificates (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    patient_visit_id bigint NOT NULL,
    doctor_id bigint,
    certificate_number text NOT NULL,
    issued_on date DEFAULT CURRENT_DATE NOT NULL,
    diagnosis text,
    recommendation text,
    rest_days integer,
    valid_until date,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    status text DEFAULT 'draft'::text NOT NULL,
    signed_by bigint,
    signed_at timestamp with time zone,
    CONSTRAINT medical_certificates_status_check CHECK ((status = ANY (ARRAY['draft'::text, 'signed'::text]))),
    CONSTRAINT medical_certificates_pkey PRIMARY KEY (id),
    CONSTRAINT medical_certificates_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT medical_certificates_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE patient_counts (
    dimension text NOT NULL,
    value text NOT NULL,
    spelling text NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT patient_counts_pkey PRIMARY KEY (dimension, value, spelling)
);

CREATE TABLE patient_duplicate_checks (
    seq bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    subject_id bigint NOT NULL,
    CONSTRAINT patient_duplicate_checks_pkey PRIMARY KEY (seq)
);

CREATE TABLE patient_duplicate_pairs (
    older_id bigint NOT NULL,
    newer_id bigint NOT NULL,
    reasons text[] NOT NULL,
    CONSTRAINT patient_duplicate_pairs_check CHECK ((older_id < newer_id)),
    CONSTRAINT patient_duplicate_pairs_pkey PRIMARY KEY (older_id, newer_id)
);

CREATE TABLE patient_merges (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    survivor_id bigint NOT NULL,
    duplicate_id bigint NOT NULL,
    reason text NOT NULL,
    state text DEFAULT 'registry_pending'::text NOT NULL,
    differences jsonb DEFAULT '[]'::jsonb NOT NULL,
    completed_at timestamp with time zone,
    undone_at timestamp with time zone,
    undone_by bigint,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT patient_merges_check CHECK ((survivor_id <> duplicate_id)),
    CONSTRAINT patient_merges_differences_check CHECK ((jsonb_typeof(differences) = 'array'::text)),
    CONSTRAINT patient_merges_state_check CHECK ((state = ANY (ARRAY['registry_pending'::text, 'completed'::text, 'undoing'::text, 'undone'::text]))),
    CONSTRAINT patient_merges_pkey PRIMARY KEY (id),
    CONSTRAINT patient_merges_duplicate_id_fkey FOREIGN KEY (duplicate_id) REFERENCES patients(id),
    CONSTRAINT patient_merges_survivor_id_fkey FOREIGN KEY (survivor_id) REFERENCES patients(id)
);

CREATE TABLE patient_merge_rows (
    merge_id bigint NOT NULL,
    place text NOT NULL,
    table_name text NOT NULL,
    row_id bigint NOT NULL,
    version integer NOT NULL,
    CONSTRAINT patient_merge_rows_place_check CHECK ((place = ANY (ARRAY['branch'::text, 'registry'::text]))),
    CONSTRAINT patient_merge_rows_pkey PRIMARY KEY (merge_id, place, table_name, row_id),
    CONSTRAINT patient_merge_rows_merge_id_fkey FOREIGN KEY (merge_id) REFERENCES patient_merges(id)
);

CREATE TABLE patient_registrations (
    span "char" NOT NULL,
    period date NOT NULL,
    dimension text NOT NULL,
    value text NOT NULL,
    spelling text NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT patient_registrations_span_check CHECK ((span = ANY (ARRAY['d'::"char", 'm'::"char"]))),
    CONSTRAINT patient_registrations_pkey PRIMARY KEY (span, period, dimension, value, spelling)
);

CREATE TABLE patient_search (
    id bigint NOT NULL,
    search_text text NOT NULL,
    last_name text NOT NULL,
    first_name text NOT NULL,
    pin text NOT NULL,
    birth_date date NOT NULL,
    created_at timestamp with time zone NOT NULL,
    middle_name text,
    suffix text,
    CONSTRAINT patient_search_pkey PRIMARY KEY (id)
);

CREATE TABLE patient_visit_plans (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    patient_visit_id bigint NOT NULL,
    plan text NOT NULL,
    follow_up_date date,
    instructions text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT patient_visit_plans_pkey PRIMARY KEY (id),
    CONSTRAINT patient_visit_plans_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT patient_visit_plans_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE patient_visit_prescribed_medicines (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    patient_visit_id bigint NOT NULL,
    medicine_id bigint NOT NULL,
    eye text,
    dosage text,
    frequency text,
    route text,
    duration text,
    quantity integer,
    instructions text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT patient_visit_prescribed_medicines_pkey PRIMARY KEY (id),
    CONSTRAINT patient_visit_prescribed_medicines_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT patient_visit_prescribed_medicines_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

CREATE TABLE problems (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_id bigint NOT NULL,
    code text NOT NULL,
    title text,
    status text DEFAULT 'active'::text NOT NULL,
    onset date,
    resolved_on date,
    note text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT problems_check CHECK (((resolved_on IS NULL) OR (onset IS NULL) OR (resolved_on >= onset))),
    CONSTRAINT problems_status_check CHECK ((status = ANY (ARRAY['active'::text, 'resolved'::text]))),
    CONSTRAINT problems_pkey PRIMARY KEY (id),
    CONSTRAINT problems_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id)
);

CREATE TABLE queue_counters (
    branch_service_id bigint NOT NULL,
    queue_date date NOT NULL,
    last integer NOT NULL,
    CONSTRAINT queue_counters_pkey PRIMARY KEY (branch_service_id, queue_date)
);

CREATE TABLE queue_day_counts (
    queue_date date NOT NULL,
    status text NOT NULL,
    n bigint NOT NULL,
    waited bigint NOT NULL,
    wait_seconds numeric NOT NULL,
    CONSTRAINT queue_day_counts_pkey PRIMARY KEY (queue_date, status)
);

CREATE TABLE row_counts (
    table_name text NOT NULL,
    live bigint DEFAULT 0 NOT NULL,
    CONSTRAINT row_counts_pkey PRIMARY KEY (table_name)
);

CREATE TABLE schedule_exceptions (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    doctor_id bigint,
    starts_on date NOT NULL,
    ends_on date NOT NULL,
    closed boolean DEFAULT true NOT NULL,
    start_time text,
    end_time text,
    reason text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT schedule_exceptions_check CHECK ((ends_on >= starts_on)),
    CONSTRAINT schedule_exceptions_check1 CHECK (((start_time IS NULL) = (end_time IS NULL))),
    CONSTRAINT schedule_exceptions_check2 CHECK ((end_time > start_time)),
    CONSTRAINT schedule_exceptions_check3 CHECK ((closed OR (start_time IS NOT NULL))),
    CONSTRAINT schedule_exceptions_end_time_check CHECK ((end_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'::text)),
    CONSTRAINT schedule_exceptions_start_time_check CHECK ((start_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'::text)),
    CONSTRAINT schedule_exceptions_pkey PRIMARY KEY (id)
);

CREATE TABLE visit_day_counts (
    visit_date date NOT NULL,
    status text NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT visit_day_counts_pkey PRIMARY KEY (visit_date, status)
);

CREATE TABLE visit_diagnoses (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL,
    patient_visit_id bigint NOT NULL,
    patient_id bigint NOT NULL,
    code text NOT NULL,
    laterality text DEFAULT 'none'::text NOT NULL,
    "primary" boolean DEFAULT false NOT NULL,
    note text,
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    deleted_at timestamp with time zone,
    CONSTRAINT visit_diagnoses_laterality_check CHECK ((laterality = ANY (ARRAY['right'::text, 'left'::text, 'both'::text, 'none'::text]))),
    CONSTRAINT visit_diagnoses_pkey PRIMARY KEY (id),
    CONSTRAINT visit_diagnoses_patient_id_fkey FOREIGN KEY (patient_id) REFERENCES patients(id),
    CONSTRAINT visit_diagnoses_patient_visit_id_fkey FOREIGN KEY (patient_visit_id) REFERENCES patient_visits(id)
);

DO $$
BEGIN
    EXECUTE format(
        'ALTER TABLE ONLY audit_log ATTACH PARTITION audit_log_until_partitioned FOR VALUES FROM (MINVALUE) TO (%L)',
        date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month');
END
$$;

INSERT INTO audit_chain_head VALUES (1, 0, '\x');

INSERT INTO audit_chain_head VALUES (2, 0, '\x');

INSERT INTO audit_chain_head VALUES (3, 0, '\x');

INSERT INTO audit_chain_head VALUES (4, 0, '\x');

INSERT INTO audit_chain_head VALUES (5, 0, '\x');

INSERT INTO audit_chain_head VALUES (6, 0, '\x');

INSERT INTO audit_chain_head VALUES (7, 0, '\x');

INSERT INTO audit_chain_head VALUES (8, 0, '\x');

INSERT INTO audit_chain_head VALUES (9, 0, '\x');

INSERT INTO audit_chain_head VALUES (10, 0, '\x');

INSERT INTO audit_chain_head VALUES (11, 0, '\x');

INSERT INTO audit_chain_head VALUES (12, 0, '\x');

INSERT INTO audit_chain_head VALUES (13, 0, '\x');

INSERT INTO audit_chain_head VALUES (14, 0, '\x');

INSERT INTO audit_chain_head VALUES (15, 0, '\x');

INSERT INTO audit_chain_head VALUES (16, 0, '\x');

INSERT INTO audit_chain_head VALUES (17, 0, '\x');

INSERT INTO audit_chain_head VALUES (18, 0, '\x');

INSERT INTO audit_chain_head VALUES (19, 0, '\x');

INSERT INTO audit_chain_head VALUES (20, 0, '\x');

INSERT INTO audit_chain_head VALUES (21, 0, '\x');

INSERT INTO audit_chain_head VALUES (22, 0, '\x');

INSERT INTO audit_chain_head VALUES (23, 0, '\x');

INSERT INTO audit_chain_head VALUES (24, 0, '\x');

INSERT INTO audit_chain_head VALUES (25, 0, '\x');

INSERT INTO audit_chain_head VALUES (26, 0, '\x');

INSERT INTO audit_chain_head VALUES (27, 0, '\x');

INSERT INTO audit_chain_head VALUES (28, 0, '\x');

INSERT INTO audit_chain_head VALUES (29, 0, '\x');

INSERT INTO audit_chain_head VALUES (30, 0, '\x');

INSERT INTO audit_chain_head VALUES (31, 0, '\x');

INSERT INTO audit_chain_head VALUES (0, 0, '\x');

INSERT INTO billing_totals VALUES (true, 0.00);

INSERT INTO row_counts VALUES ('patients', 0);

SELECT pg_catalog.setval('patient_pin_seq', 1, false);

SELECT pg_catalog.setval('row_id_seq', 1, true);

ALTER TABLE ONLY audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (at, id);

ALTER TABLE ONLY audit_log_until_partitioned
    ADD CONSTRAINT audit_log_until_partitioned_pkey PRIMARY KEY (at, id);

CREATE INDEX allergies_patient_idx ON allergies USING btree (patient_id, id);

CREATE INDEX appointment_reminders_due_idx ON appointment_reminders USING btree (next_attempt_at) WHERE (status = 'pending'::text);

CREATE UNIQUE INDEX appointment_reminders_pending_key ON appointment_reminders USING btree (appointment_id, due_at) WHERE (status = 'pending'::text);

CREATE INDEX appointments_doctor_starts_idx ON appointments USING btree (doctor_id, starts_at) WHERE (deleted_at IS NULL);

CREATE INDEX appointments_patient_idx ON appointments USING btree (patient_id, starts_at);

CREATE UNIQUE INDEX appointments_recall_key ON appointments USING btree (recall_id) WHERE ((recall_id IS NOT NULL) AND (deleted_at IS NULL) AND (status <> ALL (ARRAY['cancelled'::text, 'no_show'::text])));

CREATE INDEX appointments_starts_idx ON appointments USING btree (starts_at) WHERE (deleted_at IS NULL);

CREATE UNIQUE INDEX attachments_once_per_patient ON attachments USING btree (patient_id, sha256) WHERE (deleted_at IS NULL);

CREATE INDEX attachments_patient_idx ON attachments USING btree (patient_id, id);

CREATE INDEX audit_log_chain_idx ON ONLY audit_log USING btree (chain_lane, chain_position, id);

CREATE INDEX audit_log_patient_idx ON ONLY audit_log USING btree (((COALESCE(after, before) ->> 'patient_id'::text)), at);

CREATE INDEX audit_log_record_idx ON ONLY audit_log USING btree (resource, record_id, at);

CREATE INDEX audit_log_shown_idx ON ONLY audit_log USING gin (((after -> 'ids'::text)) jsonb_path_ops) WHERE ((resource = 'patients'::text) AND (action = ANY (ARRAY['list'::text, 'search'::text, 'exported'::text])));

CREATE INDEX audit_log_until_partitioned_chain_lane_chain_position_id_idx ON audit_log_until_partitioned USING btree (chain_lane, chain_position, id);

CREATE INDEX audit_log_until_partitioned_expr_at_idx ON audit_log_until_partitioned USING btree (((COALESCE(after, before) ->> 'patient_id'::text)), at);

CREATE INDEX audit_log_until_partitioned_expr_idx ON audit_log_until_partitioned USING gin (((after -> 'ids'::text)) jsonb_path_ops) WHERE ((resource = 'patients'::text) AND (action = ANY (ARRAY['list'::text, 'search'::text, 'exported'::text])));

CREATE INDEX audit_log_until_partitioned_record_idx ON audit_log_until_partitioned USING btree (resource, record_id, at);

CREATE INDEX audit_log_user_idx ON ONLY audit_log USING btree (user_id, at);

CREATE INDEX audit_log_until_partitioned_user_idx ON audit_log_until_partitioned USING btree (user_id, at);

CREATE INDEX billing_transactions_date_idx ON billing_transactions USING btree (transaction_date, id) WHERE (deleted_at IS NULL);

CREATE INDEX billing_transactions_patient_idx ON billing_transactions USING btree (patient_id, transaction_date, id);

CREATE INDEX complaints_patient_idx ON complaints USING btree (patient_id);

CREATE INDEX complaints_visit_idx ON complaints USING btree (patient_visit_id);

CREATE INDEX examinations_examined_idx ON examinations USING btree (exam, examined_at, id) WHERE (deleted_at IS NULL);

CREATE INDEX examinations_patient_idx ON examinations USING btree (patient_id, exam, examined_at, id);

CREATE INDEX examinations_visit_idx ON examinations USING btree (patient_visit_id);

CREATE UNIQUE INDEX medical_certificates_number_key ON medical_certificates USING btree (certificate_number);

CREATE INDEX medical_certificates_patient_idx ON medical_certificates USING btree (patient_id);

CREATE INDEX medical_certificates_visit_idx ON medical_certificates USING btree (patient_visit_id);

CREATE INDEX patient_duplicate_pairs_newer_idx ON patient_duplicate_pairs USING btree (newer_id, older_id);

CREATE INDEX patient_merge_rows_row_idx ON patient_merge_rows USING btree (table_name, row_id);

CREATE UNIQUE INDEX patient_merges_standing_key ON patient_merges USING btree (duplicate_id) WHERE (state <> 'undone'::text);

CREATE INDEX patient_merges_survivor_idx ON patient_merges USING btree (survivor_id, id);

CREATE INDEX patient_search_prefixes_idx ON patient_search USING gin (patient_prefixes(first_name, middle_name, last_name, suffix, pin)) WITH (gin_pending_list_limit='64');

CREATE INDEX patient_search_text_idx ON patient_search USING gin (search_text public.gin_trgm_ops) WITH (gin_pending_list_limit='64');

CREATE INDEX patient_visit_plans_patient_idx ON patient_visit_plans USING btree (patient_id);

CREATE INDEX patient_visit_plans_visit_idx ON patient_visit_plans USING btree (patient_visit_id);

CREATE INDEX patient_visits_date_idx ON patient_visits USING btree (visit_date, status) WHERE (deleted_at IS NULL);

CREATE INDEX patient_visits_patient_idx ON patient_visits USING btree (patient_id, visit_date);

CREATE INDEX patients_birth_date_idx ON patients USING btree (birth_date, id) INCLUDE (created_at) WHERE (deleted_at IS NULL);

CREATE INDEX patients_civil_status_idx ON patients USING btree (civil_status) WHERE (deleted_at IS NULL);

CREATE INDEX patients_created_idx ON patients USING btree (created_at, id) WHERE (deleted_at IS NULL);

CREATE INDEX patients_duplicate_member_idx ON patients USING btree (duplicate_member) WHERE ((deleted_at IS NULL) AND (duplicate_member IS NOT NULL));

CREATE INDEX patients_duplicate_name_idx ON patients USING btree (duplicate_name, birth_date) WHERE (deleted_at IS NULL);

CREATE INDEX patients_duplicate_phone_idx ON patients USING btree (duplicate_phone) WHERE ((deleted_at IS NULL) AND (duplicate_phone IS NOT NULL));

CREATE INDEX patients_first_name_idx ON patients USING btree (first_name, id) WHERE (deleted_at IS NULL);

CREATE INDEX patients_last_name_idx ON patients USING btree (last_name, id) WHERE (deleted_at IS NULL);

CREATE INDEX patients_merged_into_idx ON patients USING btree (merged_into_id) WHERE (merged_into_id IS NOT NULL);

CREATE INDEX patients_phone_idx ON patients USING gin (phone_digits public.gin_trgm_ops) WITH (gin_pending_list_limit='64') WHERE (deleted_at IS NULL);

CREATE INDEX patients_search_idx ON patients USING gin (search_text public.gin_trgm_ops) WITH (gin_pending_list_limit='64');

CREATE INDEX patients_sex_idx ON patients USING btree (sex) WHERE (deleted_at IS NULL);

CREATE INDEX patients_status_idx ON patients USING btree (status) WHERE (deleted_at IS NULL);

CREATE INDEX prescribed_medicines_patient_idx ON patient_visit_prescribed_medicines USING btree (patient_id);

CREATE INDEX prescribed_medicines_visit_idx ON patient_visit_prescribed_medicines USING btree (patient_visit_id);

CREATE INDEX problems_patient_idx ON problems USING btree (patient_id, code, id);

CREATE INDEX queue_tickets_open_idx ON queue_tickets USING btree (queue_date) WHERE (status = ANY (ARRAY['waiting'::text, 'called'::text]));

CREATE INDEX queue_tickets_patient_all_idx ON queue_tickets USING btree (patient_id);

CREATE INDEX recalls_due_idx ON recalls USING btree (due_on) WHERE (deleted_at IS NULL);

CREATE INDEX recalls_patient_idx ON recalls USING btree (patient_id, due_on);

CREATE UNIQUE INDEX visit_diagnoses_one_primary ON visit_diagnoses USING btree (patient_visit_id) WHERE ("primary" AND (deleted_at IS NULL));

CREATE INDEX visit_diagnoses_patient_idx ON visit_diagnoses USING btree (patient_id, id);

CREATE INDEX visit_diagnoses_visit_idx ON visit_diagnoses USING btree (patient_visit_id, id);

ALTER INDEX audit_log_chain_idx ATTACH PARTITION audit_log_until_partitioned_chain_lane_chain_position_id_idx;

ALTER INDEX audit_log_patient_idx ATTACH PARTITION audit_log_until_partitioned_expr_at_idx;

ALTER INDEX audit_log_shown_idx ATTACH PARTITION audit_log_until_partitioned_expr_idx;

ALTER INDEX audit_log_pkey ATTACH PARTITION audit_log_until_partitioned_pkey;

ALTER INDEX audit_log_record_idx ATTACH PARTITION audit_log_until_partitioned_record_idx;

ALTER INDEX audit_log_user_idx ATTACH PARTITION audit_log_until_partitioned_user_idx;

CREATE TRIGGER allergies_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON allergies
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER appointments_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON appointments
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER attachments_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON attachments
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER audit_log_chain BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_chain();

CREATE TRIGGER billing_day_totals_deleted AFTER DELETE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();

CREATE TRIGGER billing_day_totals_inserted AFTER INSERT ON billing_transactions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();

CREATE TRIGGER billing_day_totals_updated AFTER UPDATE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_day_totals_changed();

CREATE TRIGGER billing_totals_deleted AFTER DELETE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();

CREATE TRIGGER billing_totals_inserted AFTER INSERT ON billing_transactions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();

CREATE TRIGGER billing_totals_updated AFTER UPDATE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();

CREATE TRIGGER billing_transactions_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON billing_transactions FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER complaints_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON complaints FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER examinations_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON examinations
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER medical_certificates_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON medical_certificates FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER patient_search_deleted AFTER DELETE ON patients
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL) EXECUTE FUNCTION patient_search_follow();

CREATE TRIGGER patient_search_inserted AFTER INSERT ON patients
    FOR EACH ROW WHEN (NEW.deleted_at IS NULL) EXECUTE FUNCTION patient_search_follow();

CREATE TRIGGER patient_search_updated AFTER UPDATE ON patients
    FOR EACH ROW WHEN ((OLD.search_text, OLD.last_name, OLD.first_name, OLD.middle_name, OLD.suffix, OLD.pin,
                        OLD.birth_date, OLD.created_at, OLD.deleted_at IS NULL)
                       IS DISTINCT FROM
                       (NEW.search_text, NEW.last_name, NEW.first_name, NEW.middle_name, NEW.suffix, NEW.pin,
                        NEW.birth_date, NEW.created_at, NEW.deleted_at IS NULL))
    EXECUTE FUNCTION patient_search_follow();

CREATE TRIGGER patient_tallies_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();

CREATE TRIGGER patient_tallies_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();

CREATE TRIGGER patient_tallies_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION patient_tallies_changed();

CREATE TRIGGER patient_visit_plans_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON patient_visit_plans FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER patient_visit_prescribed_medicines_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON patient_visit_prescribed_medicines FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER patient_visits_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON patient_visits FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER patients_count_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_rows();

CREATE TRIGGER patients_count_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_rows();

CREATE TRIGGER patients_count_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_updated_rows();

CREATE TRIGGER patients_duplicate_checks_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();

CREATE TRIGGER patients_duplicate_checks_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();

CREATE TRIGGER patients_duplicate_checks_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();

CREATE TRIGGER problems_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON problems
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER queue_day_counts_deleted AFTER DELETE ON queue_tickets
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();

CREATE TRIGGER queue_day_counts_inserted AFTER INSERT ON queue_tickets
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();

CREATE TRIGGER queue_day_counts_updated AFTER UPDATE ON queue_tickets
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_day_counts_changed();

CREATE TRIGGER queue_tickets_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON queue_tickets FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER recalls_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON recalls
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TRIGGER visit_day_counts_deleted AFTER DELETE ON patient_visits
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();

CREATE TRIGGER visit_day_counts_inserted AFTER INSERT ON patient_visits
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();

CREATE TRIGGER visit_day_counts_updated AFTER UPDATE ON patient_visits
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION visit_day_counts_changed();

CREATE TRIGGER visit_diagnoses_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON visit_diagnoses
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

SET LOCAL check_function_bodies TO DEFAULT;
