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
    deleted_at                timestamptz
);
CREATE INDEX patients_last_name_idx ON patients (last_name, first_name) WHERE deleted_at IS NULL;
CREATE INDEX patients_created_idx ON patients (created_at) WHERE deleted_at IS NULL;

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
