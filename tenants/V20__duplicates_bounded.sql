-- Likely duplicates, found without one patient stopping the rest.
--
-- fuzzystrmatch's levenshtein refuses strings over 255 characters, and a folded name can be
-- longer (two names of 100 characters, with ligatures and symbols that unaccent spells out):
-- similar names now compare their first 255 folded characters. The refresh takes the queue in
-- batches, each in a subtransaction; a batch that fails is paired again in halves, down to
-- the patient that fails, which stays queued (a warning names its id) for the next read to
-- try, while the others are paired. Past half the statement timeout it leaves the rest of the
-- queue to the next read rather than failing every one.

-- The pairs of `dirty`, found again (the body of the refresh before batches).
CREATE FUNCTION pair_likely_duplicates(dirty bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Pairs `ids` and takes their entries in (lo, hi] off the queue, in a subtransaction (the
-- function's block); when that fails, each half on its own, down to a patient that fails by
-- itself, which stays queued. Past `deadline` what is left stays queued for the next read.
-- Deadlocks and serialization failures are not caught: the request runs again.
CREATE FUNCTION pair_queued_duplicates(ids bigint[], lo bigint, hi bigint, deadline timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
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

-- Finds the pairs of every queued patient again, 200,000 queue entries at a time (a batch is
-- set-based, and two halves cost twice the whole: 100,000 patients take one batch, as they
-- took one statement before), until half the statement timeout has passed.
-- One refresher at a time per branch; one that waited finds the queue empty or nearly. A
-- name, phone or member number shared by more than ten live patients (a family line, a
-- placeholder) pairs none of them by that reason.
CREATE OR REPLACE FUNCTION refresh_patient_duplicates() RETURNS void
LANGUAGE plpgsql AS $$
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

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'pair_likely_duplicates(bigint[])', 'pair_queued_duplicates(bigint[], bigint, bigint, timestamptz)', 'refresh_patient_duplicates()'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn, current_schema());
    END LOOP;
END
$$;
