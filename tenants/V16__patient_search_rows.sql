-- A list search of patients finds the rows its words occur in through the trigram index, then
-- visits each to check the match and read its sort key. Patients' rows are wide: a word in 4%
-- of 100,000 patients has a match on nearly every page of the table. The live patients' search
-- text and sort keys are kept here as well, in rows half as wide, kept in the writing
-- transaction; a search without other conditions reads its matches here (the resource's
-- `search_rows`), and only the page's rows from patients.
CREATE TABLE patient_search (
    id          bigint PRIMARY KEY,
    search_text text NOT NULL,
    last_name   text NOT NULL,
    first_name  text NOT NULL,
    pin         text NOT NULL,
    birth_date  date NOT NULL,
    created_at  timestamptz NOT NULL
);
INSERT INTO patient_search (id, search_text, last_name, first_name, pin, birth_date, created_at)
SELECT id, search_text, last_name, first_name, pin, birth_date, created_at FROM patients WHERE deleted_at IS NULL;
CREATE INDEX patient_search_text_idx ON patient_search USING gin (search_text public.gin_trgm_ops);

-- A patient's row follows its patient: written when it is live, gone when it is not.
CREATE FUNCTION patient_search_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.deleted_at IS NOT NULL THEN
        DELETE FROM patient_search WHERE id = OLD.id;
    ELSE
        INSERT INTO patient_search (id, search_text, last_name, first_name, pin, birth_date, created_at)
        VALUES (NEW.id, NEW.search_text, NEW.last_name, NEW.first_name, NEW.pin, NEW.birth_date, NEW.created_at)
        ON CONFLICT (id) DO UPDATE
           SET search_text = EXCLUDED.search_text, last_name = EXCLUDED.last_name,
               first_name = EXCLUDED.first_name, pin = EXCLUDED.pin,
               birth_date = EXCLUDED.birth_date, created_at = EXCLUDED.created_at;
    END IF;
    RETURN NULL;
END
$$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION patient_search_follow() SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END
$$;
CREATE TRIGGER patient_search_inserted AFTER INSERT ON patients
    FOR EACH ROW WHEN (NEW.deleted_at IS NULL) EXECUTE FUNCTION patient_search_follow();
-- Only when what the row holds changes: most updates of a patient (an address, a phone) leave it.
CREATE TRIGGER patient_search_updated AFTER UPDATE ON patients
    FOR EACH ROW WHEN ((OLD.search_text, OLD.last_name, OLD.first_name, OLD.pin, OLD.birth_date, OLD.created_at,
                        OLD.deleted_at IS NULL)
                       IS DISTINCT FROM
                       (NEW.search_text, NEW.last_name, NEW.first_name, NEW.pin, NEW.birth_date, NEW.created_at,
                        NEW.deleted_at IS NULL))
    EXECUTE FUNCTION patient_search_follow();
CREATE TRIGGER patient_search_deleted AFTER DELETE ON patients
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL) EXECUTE FUNCTION patient_search_follow();
