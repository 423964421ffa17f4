-- A patient's allergies and intolerances: to a medicine of the registry (checked when the
-- pharmacy dispenses it) or to a substance named in words.
CREATE TABLE allergies (
    id          bigserial PRIMARY KEY,
    patient_id  bigint NOT NULL REFERENCES patients,
    medicine_id bigint,
    substance   text,
    reaction    text,
    severity    text NOT NULL CHECK (severity IN ('mild', 'moderate', 'severe')),
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'resolved')),
    noted_on    date,
    notes       text,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    CHECK (medicine_id IS NOT NULL OR btrim(substance) <> '')
);
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX allergies_patient_idx ON allergies (patient_id, id);
-- No row is written for a patient merged into another (tenants/V15).
CREATE TRIGGER allergies_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON allergies
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();
