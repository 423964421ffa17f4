-- A branch schema weighs what its relations weigh: every one is catalogue rows that every
-- PostgreSQL backend serving the branch caches, and its first pages on disk. A thousand
-- branches on one server multiply each of them by a thousand. This migration keeps what a
-- query or a constraint needs and no more.

-- One sequence numbers the rows of every table, instead of one per table: a record's id is
-- unique within the branch, not only within its table. The audit log keeps its own (it
-- grows with every read, records should not), and the patient PINs and certificate numbers
-- theirs (they are printed numbers, with their own series). The new sequence starts past
-- every value any of the old ones gave, so no id is given twice.
CREATE SEQUENCE row_id_seq AS bigint;
DO $$
DECLARE
    owned record;
    highest bigint := 0;
BEGIN
    -- From pg_depend's index on what an object depends on: reading pg_class by namespace
    -- would scan every branch's relations.
    FOR owned IN
        SELECT d.objid::regclass AS sequence, d.refobjid::regclass AS owner, a.attname AS column_name,
               pg_sequence_last_value(d.objid::regclass) AS last_value
          FROM pg_depend n
          JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = n.objid
                          AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a'
          JOIN pg_class s ON s.oid = n.objid
          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE n.refclassid = 'pg_namespace'::regclass AND n.refobjid = current_schema()::regnamespace
           AND n.classid = 'pg_class'::regclass AND s.relkind = 'S'
           AND s.relname NOT IN ('row_id_seq', 'audit_log_id_seq', 'patient_pin_seq', 'medical_certificate_seq')
         ORDER BY s.relname
    LOOP
        highest := greatest(highest, coalesce(owned.last_value, 0));
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT nextval(%L::regclass)',
                       owned.owner, owned.column_name, current_schema() || '.row_id_seq');
        EXECUTE format('DROP SEQUENCE %s', owned.sequence);
    END LOOP;
    IF highest > 0 THEN
        PERFORM setval('row_id_seq', highest);
    END IF;
END
$$;

-- The audit log's months: the month after this one is made in this month's last week
-- (the server's walk, every six hours, asks for it then), not two months ahead in every
-- branch at all times: an empty month is a table and its seven indexes. Months made ahead
-- that are empty and begin after that week are dropped. Months are named by the function
-- that makes them, `audit_log_yYYYYmMM`, on UTC's calendar.
DO $$
DECLARE
    ahead regclass;
    empty boolean;
BEGIN
    FOR ahead IN
        SELECT c.oid::regclass
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'audit_log'::regclass
           AND c.relname ~ '^audit_log_y[0-9]{4}m[0-9]{2}$'
           AND to_date(substr(c.relname, 12), 'YYYY"m"MM')::timestamp AT TIME ZONE 'UTC' > now() + interval '7 days'
         ORDER BY c.relname
    LOOP
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', ahead) INTO empty;
        IF empty THEN
            EXECUTE format('DROP TABLE %s', ahead);
        END IF;
    END LOOP;
END
$$;

-- Indexes: each one left serves a query the server runs or backs a constraint
-- (`tests/api/tenancy/indexes.rs` names the query of each and fails on one nobody reads).
-- An examination's rows by patient were two indexes, the live ones in date order and all of
-- them for a merge; one index of all rows in date order serves both, and its order needs no
-- sort. The visit index holds deleted rows too, for undoing a merge.
DO $$
DECLARE
    exam text;
BEGIN
    FOREACH exam IN ARRAY ARRAY['visual_acuities', 'refractions', 'tonometries', 'slit_lamps', 'funduscopies',
                                'gonioscopies', 'corneal_topographies', 'amsler_grids', 'eoms',
                                'exophthalmometries', 'lacrimal_irrigations', 'radiologies',
                                'gross_examinations', 'indirect_ophthalmoscopies']
    LOOP
        EXECUTE format('DROP INDEX %I, %I, %I', exam || '_patient_idx', exam || '_patient_all_idx', exam || '_visit_idx');
        EXECUTE format('CREATE INDEX %I ON %I (patient_id, examined_at, id)', exam || '_patient_idx', exam);
        EXECUTE format('CREATE INDEX %I ON %I (patient_visit_id)', exam || '_visit_idx', exam);
    END LOOP;
END
$$;

-- The same for a patient's bills.
DROP INDEX billing_transactions_patient_idx, billing_transactions_patient_all_idx;
CREATE INDEX billing_transactions_patient_idx ON billing_transactions (patient_id, transaction_date, id);

-- The dashboard's birthdays by registration month read the birth-date index alone.
DROP INDEX patients_birth_created_idx, patients_birth_date_idx;
CREATE INDEX patients_birth_date_idx ON patients (birth_date, id) INCLUDE (created_at) WHERE deleted_at IS NULL;
-- FHIR's name searches find merged patients too, which a live-only index cannot answer.
DROP INDEX patients_search_idx;
CREATE INDEX patients_search_idx ON patients USING gin (search_text public.gin_trgm_ops) WITH (gin_pending_list_limit = 64);
-- Undoing a merge reads a visit's diagnoses deleted or not.
DROP INDEX visit_diagnoses_visit_idx;
CREATE INDEX visit_diagnoses_visit_idx ON visit_diagnoses (patient_visit_id, id);

-- Read by nothing a unique index does not already serve (a standing merge of a duplicate, a
-- pending reminder of an appointment), or so unselective, on so few rows, that PostgreSQL
-- reads the table instead: a pair's reasons (four values), a branch's schedule exceptions
-- (a few dozen rows). The patients' sex, status and civil status stay: a filtered list
-- counts its rows from them alone (1,430 lists a second against 113 without, on 100,000).
DROP INDEX patient_merges_duplicate_idx, appointment_reminders_appointment_idx,
           patient_duplicate_pairs_reasons_idx, schedule_exceptions_days_idx;
