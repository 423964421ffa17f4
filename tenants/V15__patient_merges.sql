-- Duplicate patients, found and merged.
--
-- A duplicate merged into a survivor keeps the survivor's id and is soft-deleted with it:
-- lists, searches, exports and the dashboards leave it out, a read of it is sent to the
-- survivor and a write naming it is refused. Its records move to the survivor.
ALTER TABLE patients ADD COLUMN merged_into_id bigint REFERENCES patients;
-- The patients merged into one (FHIR's `replaces` links).
CREATE INDEX patients_merged_into_idx ON patients (merged_into_id) WHERE merged_into_id IS NOT NULL;

-- Every merge: who into whom and why, the fields that differed (the survivor kept its own),
-- and where it stands. A merge moves the branch's rows first and the registry's second (two
-- databases, two transactions): `registry_pending` until the registry's rows moved too;
-- an undo goes `undoing` while the registry's rows go back.
CREATE TABLE patient_merges (
    id           bigserial PRIMARY KEY,
    survivor_id  bigint NOT NULL REFERENCES patients,
    duplicate_id bigint NOT NULL REFERENCES patients,
    reason       text NOT NULL,
    state        text NOT NULL DEFAULT 'registry_pending'
                 CHECK (state IN ('registry_pending', 'completed', 'undoing', 'undone')),
    differences  jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(differences) = 'array'),
    completed_at timestamptz,
    undone_at    timestamptz,
    undone_by    bigint,
    version      integer NOT NULL DEFAULT 1,
    created_by   bigint,
    updated_by   bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (survivor_id <> duplicate_id)
);
CREATE INDEX patient_merges_survivor_idx ON patient_merges (survivor_id, id);
CREATE INDEX patient_merges_duplicate_idx ON patient_merges (duplicate_id, id);
-- A patient is the duplicate of one standing merge at most.
CREATE UNIQUE INDEX patient_merges_standing_key ON patient_merges (duplicate_id) WHERE state <> 'undone';

-- What a merge moved: each row, in the branch or in the registry, with its version right
-- after the move. An undo moves back only rows still at that version.
CREATE TABLE patient_merge_rows (
    merge_id   bigint NOT NULL REFERENCES patient_merges,
    place      text NOT NULL CHECK (place IN ('branch', 'registry')),
    table_name text NOT NULL,
    row_id     bigint NOT NULL,
    version    integer NOT NULL,
    PRIMARY KEY (merge_id, place, table_name, row_id)
);

-- A row may not be written for a merged patient. The lock waits for a merge of that patient
-- in progress (it holds the patient's row), and the check then sees what it wrote; a row
-- written before the merge took its lock is one the merge waits for, and moves.
CREATE FUNCTION refuse_merged_patient() RETURNS trigger
LANGUAGE plpgsql AS $$
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

-- Every table of the branch that names a patient: the trigger above, and an index on the
-- patient over all its rows (a merge moves deleted rows too).
DO $$
DECLARE
    named record;
BEGIN
    FOR named IN
        -- The catalogue of this schema only: information_schema's views would read every
        -- schema's columns, a cost that grows with the number of branches on the server.
        SELECT c.relname::text AS table_name FROM pg_class c
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'patient_id' AND NOT a.attisdropped
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
         ORDER BY c.relname
    LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OF patient_id ON %I
                            FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient()',
                       named.table_name || '_patient_not_merged', named.table_name);
        IF NOT EXISTS (
            SELECT 1 FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = format('%I', named.table_name)::regclass AND a.attname = 'patient_id'
               AND i.indpred IS NULL
        ) THEN
            EXECUTE format('CREATE INDEX %I ON %I (patient_id)', named.table_name || '_patient_all_idx', named.table_name);
        END IF;
    END LOOP;
END
$$;

-- Duplicates. Names compare with accents, case, spacing and punctuation folded; phones by
-- their last ten digits (numbers with and without a country code match), ignoring numbers
-- too short to mean anything and runs of one digit; the one identifier patients carry
-- besides the PIN (which the server makes, once per patient) is an insurance member number,
-- compared under the same insurance, letters and digits only. Kept with each row, so that
-- finding a patient's pairs compares columns.
ALTER TABLE patients
    ADD COLUMN duplicate_name text GENERATED ALWAYS AS (
        regexp_replace(search_normalize(first_name || '|' || last_name), '[^[:alnum:]|]+', '', 'g')) STORED,
    ADD COLUMN duplicate_phone text GENERATED ALWAYS AS (
        CASE WHEN length(regexp_replace(phone, '[^0-9]', '', 'g')) >= 7
                  AND regexp_replace(phone, '[^0-9]', '', 'g') !~ '^(.)\1*$'
             THEN right(regexp_replace(phone, '[^0-9]', '', 'g'), 10) END) STORED,
    ADD COLUMN duplicate_member text GENERATED ALWAYS AS (
        CASE WHEN upper(regexp_replace(insurance_member_no, '[^[:alnum:]]+', '', 'g')) <> ''
             THEN insurance_id || ':' || upper(regexp_replace(insurance_member_no, '[^[:alnum:]]+', '', 'g')) END) STORED;
CREATE INDEX patients_duplicate_name_idx ON patients (duplicate_name, birth_date) WHERE deleted_at IS NULL;
CREATE INDEX patients_duplicate_phone_idx ON patients (duplicate_phone)
    WHERE deleted_at IS NULL AND duplicate_phone IS NOT NULL;
CREATE INDEX patients_duplicate_member_idx ON patients (duplicate_member)
    WHERE deleted_at IS NULL AND duplicate_member IS NOT NULL;

-- The pairs of likely duplicates among live patients, with their reasons (older patient
-- first). Kept by `refresh_patient_duplicates`, which a read of the list runs first, from
-- the patients changed since the last one.
CREATE TABLE patient_duplicate_pairs (
    older_id bigint NOT NULL,
    newer_id bigint NOT NULL,
    reasons  text[] NOT NULL,
    PRIMARY KEY (older_id, newer_id),
    CHECK (older_id < newer_id)
);
CREATE INDEX patient_duplicate_pairs_newer_idx ON patient_duplicate_pairs (newer_id, older_id);
CREATE INDEX patient_duplicate_pairs_reasons_idx ON patient_duplicate_pairs USING gin (reasons);

-- Patients whose pairs must be found again: written by the statements that change patients,
-- taken by the refresh (a row committed after the refresh read the queue waits for the next).
CREATE TABLE patient_duplicate_checks (
    seq        bigserial PRIMARY KEY,
    subject_id bigint NOT NULL
);

-- Changed patients, and every live patient sharing one of the keys they had before the change:
-- a group that shrinks below the limit of the refresh gains pairs. (The groups a patient's
-- keys lead to now are found by the refresh itself.)
CREATE FUNCTION queue_duplicate_checks_of(ids bigint[], names text[], births date[], phones text[], members text[])
RETURNS void LANGUAGE sql AS $$
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

-- Statement-level: a bulk import queues its patients in one statement.
CREATE FUNCTION queue_duplicate_checks() RETURNS trigger
LANGUAGE plpgsql AS $$
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
CREATE TRIGGER patients_duplicate_checks_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();
CREATE TRIGGER patients_duplicate_checks_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();
CREATE TRIGGER patients_duplicate_checks_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION queue_duplicate_checks();

-- Finds the pairs of every queued patient again. One refresher at a time per branch; one
-- that waited finds the queue empty or nearly. A name, phone or member number shared by more
-- than ten live patients (a family line, a placeholder) pairs none of them by that reason.
CREATE FUNCTION refresh_patient_duplicates() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    dirty bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM patient_duplicate_checks) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock('patient_duplicate_pairs'::regclass::oid::bigint);
    WITH taken AS (DELETE FROM patient_duplicate_checks RETURNING subject_id)
    SELECT coalesce(array_agg(DISTINCT subject_id), '{}') INTO dirty FROM taken;
    IF cardinality(dirty) = 0 THEN
        RETURN;
    END IF;
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
         WHERE public.levenshtein_less_equal(d.duplicate_name, o.duplicate_name, 1) = 1
    )
    SELECT least(a, b), greatest(a, b), array_agg(DISTINCT reason ORDER BY reason)
      FROM found GROUP BY 1, 2
    ON CONFLICT (older_id, newer_id) DO NOTHING;
END
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'refuse_merged_patient()', 'queue_duplicate_checks_of(bigint[], text[], date[], text[], text[])',
        'queue_duplicate_checks()', 'refresh_patient_duplicates()'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn, current_schema());
    END LOOP;
END
$$;

-- Every live patient is checked once; the first read of the list finds their pairs.
INSERT INTO patient_duplicate_checks (subject_id) SELECT id FROM patients WHERE deleted_at IS NULL;
