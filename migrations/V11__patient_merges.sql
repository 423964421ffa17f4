-- Merging duplicate patients, the registry's part: the permission, each merge of a branch's
-- patients as the registry saw it, the registry rows it moved, and what keeps registry rows
-- off a merged patient.

-- The catalogue is mirrored into this table at every start; the row is here already so that
-- the administrator role can hold the permission on a registry that existed before it.
INSERT INTO permissions (name, description)
VALUES ('patients.merge', 'Merge duplicate patients and undo merges')
ON CONFLICT (name) DO NOTHING;
INSERT INTO role_permissions (role_id, permission)
SELECT id, 'patients.merge' FROM roles WHERE name = 'admin' AND deleted_at IS NULL
ON CONFLICT DO NOTHING;

-- A merge of a branch's patients (`merge_id` is the branch's own record of it).
CREATE TABLE branch_patient_merges (
    branch_id    bigint NOT NULL REFERENCES branches,
    merge_id     bigint NOT NULL,
    duplicate_id bigint NOT NULL,
    survivor_id  bigint NOT NULL,
    merged_at    timestamptz NOT NULL DEFAULT now(),
    undone_at    timestamptz,
    PRIMARY KEY (branch_id, merge_id)
);
CREATE INDEX branch_patient_merges_duplicate_idx ON branch_patient_merges (branch_id, duplicate_id)
    WHERE undone_at IS NULL;

-- The registry rows a merge moved, with their versions right after the move.
CREATE TABLE branch_patient_merge_rows (
    branch_id  bigint NOT NULL,
    merge_id   bigint NOT NULL,
    table_name text NOT NULL,
    row_id     bigint NOT NULL,
    version    integer NOT NULL,
    PRIMARY KEY (branch_id, merge_id, table_name, row_id),
    FOREIGN KEY (branch_id, merge_id) REFERENCES branch_patient_merges
);

-- The advisory lock of one patient of one branch: a merge holds it exclusively while it
-- moves the registry's rows of the duplicate; every write naming that patient holds it
-- shared, so that the two never interleave.
CREATE FUNCTION branch_patient_key(branch_id bigint, patient_id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT hashtextextended(branch_id::text || ':' || patient_id::text, 0)
$$;

-- A registry row may not name a merged patient. A row written before the merge took the
-- lock is one the merge waits for, and moves; one written after it sees the merge.
CREATE FUNCTION refuse_merged_branch_patient() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_catalog, pg_temp AS $$
DECLARE
    survivor bigint;
BEGIN
    IF NEW.patient_id IS NULL
       OR (TG_OP = 'UPDATE' AND (NEW.patient_id, NEW.branch_id) IS NOT DISTINCT FROM (OLD.patient_id, OLD.branch_id)) THEN
        RETURN NEW;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(branch_patient_key(NEW.branch_id, NEW.patient_id));
    SELECT m.survivor_id INTO survivor FROM branch_patient_merges m
     WHERE m.branch_id = NEW.branch_id AND m.duplicate_id = NEW.patient_id AND m.undone_at IS NULL;
    IF survivor IS NOT NULL THEN
        RAISE EXCEPTION 'patient % of branch % was merged into patient %', NEW.patient_id, NEW.branch_id, survivor
            USING ERRCODE = 'MG410', DETAIL = survivor::text;
    END IF;
    RETURN NEW;
END
$$;

-- Every registry table that names a branch's patient: the trigger, and an index to find a
-- patient's rows.
DO $$
DECLARE
    named record;
BEGIN
    FOR named IN
        SELECT c.table_name FROM information_schema.columns c
          JOIN information_schema.tables t USING (table_schema, table_name)
         WHERE c.table_schema = 'public' AND c.column_name = 'patient_id' AND t.table_type = 'BASE TABLE'
           AND EXISTS (SELECT 1 FROM information_schema.columns b
                        WHERE b.table_schema = 'public' AND b.table_name = c.table_name AND b.column_name = 'branch_id')
         ORDER BY c.table_name
    LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OF patient_id, branch_id ON public.%I
                            FOR EACH ROW EXECUTE FUNCTION refuse_merged_branch_patient()',
                       named.table_name || '_patient_not_merged', named.table_name);
        EXECUTE format('CREATE INDEX %I ON public.%I (branch_id, patient_id)',
                       named.table_name || '_patient_idx', named.table_name);
    END LOOP;
END
$$;
