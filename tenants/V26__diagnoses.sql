-- Coded diagnoses of a visit and a patient's problem list. Codes are ICD-10-CM codes of the
-- registry's `diagnosis_codes` (migrations/V18), checked by the server on write: the registry
-- may be another database, so there is no foreign key.

CREATE TABLE visit_diagnoses (
    id                bigserial PRIMARY KEY,
    patient_visit_id  bigint NOT NULL REFERENCES patient_visits,
    -- The visit's patient, filled in by the server: a merge of patients moves it.
    patient_id        bigint NOT NULL REFERENCES patients,
    code              text NOT NULL,
    laterality        text NOT NULL DEFAULT 'none' CHECK (laterality IN ('right', 'left', 'both', 'none')),
    is_primary        boolean NOT NULL DEFAULT false,
    note              text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz
);
CREATE INDEX visit_diagnoses_visit_idx ON visit_diagnoses (patient_visit_id, id) WHERE deleted_at IS NULL;
-- At most one primary diagnosis per visit.
CREATE UNIQUE INDEX visit_diagnoses_one_primary ON visit_diagnoses (patient_visit_id)
    WHERE is_primary AND deleted_at IS NULL;
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX visit_diagnoses_patient_idx ON visit_diagnoses (patient_id, id);
-- No row is written for a patient merged into another (tenants/V15).
CREATE TRIGGER visit_diagnoses_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON visit_diagnoses
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

CREATE TABLE problems (
    id                bigserial PRIMARY KEY,
    patient_id        bigint NOT NULL REFERENCES patients,
    code              text NOT NULL,
    title             text,
    status            text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'resolved')),
    onset             date,
    resolved_on       date,
    note              text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    CHECK (resolved_on IS NULL OR onset IS NULL OR resolved_on >= onset)
);
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX problems_patient_idx ON problems (patient_id, code, id);
CREATE TRIGGER problems_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON problems
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();
