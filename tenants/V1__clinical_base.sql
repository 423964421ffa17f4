-- One branch's clinical data. Runs with search_path set to the branch schema, so every name
-- here is unqualified and lands in that schema.

-- The branch this schema belongs to; filled by provisioning (one row).
CREATE TABLE branch_info (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    branch_id bigint NOT NULL,
    code      text NOT NULL
);

-- PINs come from a sequence: unique under concurrent creates and never reused.
CREATE SEQUENCE patient_pin_seq;

CREATE FUNCTION next_patient_pin() RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT (SELECT code FROM branch_info) || '-' || lpad(nextval('patient_pin_seq')::text, 6, '0')
$$;

-- Live (not soft-deleted) rows per table, kept by trigger, so that an unfiltered list knows
-- its total without counting a large table on every page.
CREATE TABLE row_counts (
    table_name text PRIMARY KEY,
    live       bigint NOT NULL DEFAULT 0
);

-- Statement-level, so that a bulk import adjusts the count once, not once per row.
CREATE FUNCTION count_inserted_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
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
LANGUAGE plpgsql AS $$
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

CREATE FUNCTION count_deleted_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta bigint := (SELECT count(*) FROM old_rows WHERE deleted_at IS NULL);
BEGIN
    IF delta <> 0 THEN
        UPDATE row_counts SET live = live - delta WHERE table_name = TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;

-- Search text is lowercased and unaccented so that "pena" finds "Peña". unaccent() is only
-- STABLE; pinning its dictionary makes this wrapper safe to mark IMMUTABLE and index.
CREATE FUNCTION search_normalize(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT lower(public.unaccent('public.unaccent'::regdictionary, $1))
$$;

CREATE TABLE patients (
    id                        bigserial PRIMARY KEY,
    pin                       text NOT NULL UNIQUE DEFAULT next_patient_pin(),
    first_name                text NOT NULL,
    middle_name               text,
    last_name                 text NOT NULL,
    suffix                    text,
    birth_date                date NOT NULL,
    sex                       text NOT NULL,
    civil_status              text,
    status                    text NOT NULL DEFAULT 'active',
    phone                     text,
    email                     text,
    address_line              text,
    city                      text,
    province                  text,
    postal_code               text,
    country                   text,
    occupation                text,
    emergency_contact_name    text,
    emergency_contact_relation text,
    emergency_contact_phone   text,
    insurance_id              bigint,
    insurance_member_no       text,
    notes                     text,
    version                   integer NOT NULL DEFAULT 1,
    created_by                bigint,
    updated_by                bigint,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    deleted_at                timestamptz,
    -- Every name part and the PIN, normalised: a search word matches anywhere, any order.
    search_text               text GENERATED ALWAYS AS (search_normalize(
                                  first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name || ' '
                                  || coalesce(suffix, '') || ' ' || pin)) STORED,
    phone_digits              text GENERATED ALWAYS AS (regexp_replace(phone, '[^0-9]', '', 'g')) STORED
);
CREATE INDEX patients_last_name_idx ON patients (last_name, id) WHERE deleted_at IS NULL;
CREATE INDEX patients_first_name_idx ON patients (first_name, id) WHERE deleted_at IS NULL;
CREATE INDEX patients_birth_date_idx ON patients (birth_date, id) WHERE deleted_at IS NULL;
CREATE INDEX patients_created_idx ON patients (created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX patients_sex_idx ON patients (sex) WHERE deleted_at IS NULL;
CREATE INDEX patients_status_idx ON patients (status) WHERE deleted_at IS NULL;
CREATE INDEX patients_civil_status_idx ON patients (civil_status) WHERE deleted_at IS NULL;
INSERT INTO row_counts (table_name) VALUES ('patients');
CREATE TRIGGER patients_count_inserted AFTER INSERT ON patients
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_rows();
CREATE TRIGGER patients_count_updated AFTER UPDATE ON patients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_updated_rows();
CREATE TRIGGER patients_count_deleted AFTER DELETE ON patients
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_rows();
CREATE INDEX patients_search_idx ON patients USING gin (search_text public.gin_trgm_ops) WHERE deleted_at IS NULL;
CREATE INDEX patients_phone_idx ON patients USING gin (phone_digits public.gin_trgm_ops) WHERE deleted_at IS NULL;

CREATE TABLE patient_visits (
    id          bigserial PRIMARY KEY,
    patient_id  bigint NOT NULL REFERENCES patients,
    visit_date  date NOT NULL,
    visit_type  text,
    doctor_id   bigint,
    reason      text,
    status      text NOT NULL DEFAULT 'scheduled',
    notes       text,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE INDEX patient_visits_patient_idx ON patient_visits (patient_id, visit_date);

CREATE TABLE complaints (
    id               bigserial PRIMARY KEY,
    patient_id       bigint NOT NULL REFERENCES patients,
    patient_visit_id bigint NOT NULL REFERENCES patient_visits,
    complaint        text NOT NULL,
    eye              text,
    onset            text,
    duration         text,
    severity         text,
    notes            text,
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE INDEX complaints_patient_idx ON complaints (patient_id);
CREATE INDEX complaints_visit_idx ON complaints (patient_visit_id);

-- Every visit record below carries both the patient and the visit.
CREATE TABLE patient_visit_plans (
    id               bigserial PRIMARY KEY,
    patient_id       bigint NOT NULL REFERENCES patients,
    patient_visit_id bigint NOT NULL REFERENCES patient_visits,
    plan             text NOT NULL,
    follow_up_date   date,
    instructions     text,
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE INDEX patient_visit_plans_patient_idx ON patient_visit_plans (patient_id);
CREATE INDEX patient_visit_plans_visit_idx ON patient_visit_plans (patient_visit_id);

CREATE TABLE patient_visit_prescribed_medicines (
    id               bigserial PRIMARY KEY,
    patient_id       bigint NOT NULL REFERENCES patients,
    patient_visit_id bigint NOT NULL REFERENCES patient_visits,
    -- A registry medicine (master data), checked by the server on write.
    medicine_id      bigint NOT NULL,
    eye              text,
    dosage           text,
    frequency        text,
    route            text,
    duration         text,
    quantity         integer,
    instructions     text,
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE INDEX prescribed_medicines_patient_idx ON patient_visit_prescribed_medicines (patient_id);
CREATE INDEX prescribed_medicines_visit_idx ON patient_visit_prescribed_medicines (patient_visit_id);

CREATE SEQUENCE medical_certificate_seq;

-- Certificate numbers default to MC-<branch code>-<6 digits>, skipping numbers a clinic
-- already typed by hand; a number given by the clinic must be unique in the branch too.
CREATE FUNCTION next_certificate_number() RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    candidate text;
BEGIN
    LOOP
        candidate := 'MC-' || (SELECT code FROM branch_info) || '-' || lpad(nextval('medical_certificate_seq')::text, 6, '0');
        EXIT WHEN NOT EXISTS (SELECT 1 FROM medical_certificates WHERE certificate_number = candidate);
    END LOOP;
    RETURN candidate;
END
$$;

CREATE TABLE medical_certificates (
    id                 bigserial PRIMARY KEY,
    patient_id         bigint NOT NULL REFERENCES patients,
    patient_visit_id   bigint NOT NULL REFERENCES patient_visits,
    doctor_id          bigint,
    certificate_number text NOT NULL DEFAULT next_certificate_number(),
    issued_on          date NOT NULL DEFAULT current_date,
    diagnosis          text,
    recommendation     text,
    rest_days          integer,
    valid_until        date,
    version            integer NOT NULL DEFAULT 1,
    created_by         bigint,
    updated_by         bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz
);
CREATE UNIQUE INDEX medical_certificates_number_key ON medical_certificates (certificate_number);
CREATE INDEX medical_certificates_patient_idx ON medical_certificates (patient_id);
CREATE INDEX medical_certificates_visit_idx ON medical_certificates (patient_visit_id);

-- Who changed or looked at what, written in the same transaction as the change.
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    user_id    bigint,
    action     text NOT NULL,
    resource   text NOT NULL,
    record_id  bigint,
    before     jsonb,
    after      jsonb
);
CREATE INDEX audit_log_record_idx ON audit_log (resource, record_id, at);
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_user_idx ON audit_log (user_id, at);
