-- The type-ahead's index of every word start moves from `patients` to `patient_search`, the
-- live patients' narrow rows with their sort keys: a common word's matches are sorted from
-- rows half as wide (for 100,000 patients, the 4,000 of one surname lie on 1,532 pages there
-- against 2,703), and only the answer's rows are read from `patients`. Those rows now hold
-- the middle name and suffix as well, which the words are made of.
ALTER TABLE patient_search ADD COLUMN middle_name text, ADD COLUMN suffix text;

-- Filled again rather than updated in place, which would leave every row's old version
-- behind; the indexes are built once, after the rows.
DROP INDEX patient_search_text_idx;
TRUNCATE patient_search;
INSERT INTO patient_search (id, search_text, last_name, first_name, middle_name, suffix, pin, birth_date, created_at)
SELECT id, search_text, last_name, first_name, middle_name, suffix, pin, birth_date, created_at
  FROM patients WHERE deleted_at IS NULL;
-- A GIN index keeps new entries in a pending list until they are merged into it, and every
-- search through the index reads the whole list: up to 4 MB by default, which a branch
-- registering a hundred patients a day fills over months, long before autovacuum's threshold
-- for inserts into 100,000 rows; the registration that overflows it then merges it all. The
-- indexes that searches and the type-ahead read keep theirs at 64 kB, the least: a search
-- reads a few pages of it at most, and a merge is small. (5,000 patients inserted in one
-- statement: 2.5 to 3.3 s, against 1.8 to 2.7 s with 4 MB.)
CREATE INDEX patient_search_text_idx ON patient_search USING gin (search_text public.gin_trgm_ops)
    WITH (gin_pending_list_limit = 64);
CREATE INDEX patient_search_prefixes_idx ON patient_search
    USING gin (patient_prefixes(first_name, middle_name, last_name, suffix, pin)) WITH (gin_pending_list_limit = 64);
DROP INDEX patients_prefixes_idx;
ALTER INDEX patients_search_idx SET (gin_pending_list_limit = 64);
ALTER INDEX patients_phone_idx SET (gin_pending_list_limit = 64);
SELECT gin_clean_pending_list('patients_search_idx'), gin_clean_pending_list('patients_phone_idx');

-- The patient's row is followed as before, its middle name and suffix with it.
CREATE OR REPLACE FUNCTION patient_search_follow() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- CREATE OR REPLACE resets a function's settings: it resolves names in its schema again.
DO $$ BEGIN EXECUTE format('ALTER FUNCTION patient_search_follow() SET search_path = pg_catalog, %I, pg_temp',
                           current_schema()); END $$;
-- A change of case or of an empty middle name to none leaves `search_text` as it was: the
-- update trigger now compares the two columns themselves.
DROP TRIGGER patient_search_updated ON patients;
CREATE TRIGGER patient_search_updated AFTER UPDATE ON patients
    FOR EACH ROW WHEN ((OLD.search_text, OLD.last_name, OLD.first_name, OLD.middle_name, OLD.suffix, OLD.pin,
                        OLD.birth_date, OLD.created_at, OLD.deleted_at IS NULL)
                       IS DISTINCT FROM
                       (NEW.search_text, NEW.last_name, NEW.first_name, NEW.middle_name, NEW.suffix, NEW.pin,
                        NEW.birth_date, NEW.created_at, NEW.deleted_at IS NULL))
    EXECUTE FUNCTION patient_search_follow();
