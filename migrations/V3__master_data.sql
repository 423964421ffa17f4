-- Master data and lookups shared by every branch. Codes are stored upper-cased and unique
-- among live rows; money is NUMERIC(12,2), never a float.

CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE bill_item_categories (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,
    description text,
    active      boolean NOT NULL DEFAULT true,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE UNIQUE INDEX bill_item_categories_name_key ON bill_item_categories (lower(name)) WHERE deleted_at IS NULL;

CREATE TABLE payment_methods (
    id                 bigserial PRIMARY KEY,
    code               text NOT NULL,
    name               text NOT NULL,
    requires_reference boolean NOT NULL DEFAULT false,
    active             boolean NOT NULL DEFAULT true,
    version            integer NOT NULL DEFAULT 1,
    created_by         bigint,
    updated_by         bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz
);
CREATE UNIQUE INDEX payment_methods_code_key ON payment_methods (code) WHERE deleted_at IS NULL;

CREATE TABLE suppliers (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL,
    contact_name text,
    phone        text,
    email        text,
    address      text,
    tax_id       text,
    active       boolean NOT NULL DEFAULT true,
    version      integer NOT NULL DEFAULT 1,
    created_by   bigint,
    updated_by   bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    deleted_at   timestamptz
);
CREATE UNIQUE INDEX suppliers_name_key ON suppliers (lower(name)) WHERE deleted_at IS NULL;

-- Fixed, in lifecycle order.
CREATE TABLE purchase_order_statuses (
    id       bigint PRIMARY KEY,
    value    text NOT NULL UNIQUE,
    label    text NOT NULL,
    position integer NOT NULL
);
INSERT INTO purchase_order_statuses (id, value, label, position) VALUES
    (1, 'draft', 'Draft', 1), (2, 'ordered', 'Ordered', 2), (3, 'partially_received', 'Partially received', 3),
    (4, 'received', 'Received', 4), (5, 'closed', 'Closed', 5), (6, 'cancelled', 'Cancelled', 6);

CREATE TABLE bill_items (
    id                    bigserial PRIMARY KEY,
    code                  text NOT NULL,
    name                  text NOT NULL,
    bill_item_category_id bigint NOT NULL REFERENCES bill_item_categories,
    unit_price            numeric(12, 2) NOT NULL CHECK (unit_price >= 0),
    description           text,
    active                boolean NOT NULL DEFAULT true,
    version               integer NOT NULL DEFAULT 1,
    created_by            bigint,
    updated_by            bigint,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    deleted_at            timestamptz
);
CREATE UNIQUE INDEX bill_items_code_key ON bill_items (code) WHERE deleted_at IS NULL;

CREATE TABLE medicines (
    id                    bigserial PRIMARY KEY,
    generic_name          text NOT NULL,
    brand_name            text,
    form                  text NOT NULL,
    strength              text,
    route                 text NOT NULL,
    unit                  text NOT NULL,
    requires_prescription boolean NOT NULL DEFAULT true,
    status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    version               integer NOT NULL DEFAULT 1,
    created_by            bigint,
    updated_by            bigint,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    deleted_at            timestamptz
);
CREATE INDEX medicines_generic_name_idx ON medicines (generic_name, id) WHERE deleted_at IS NULL;

CREATE TABLE procedures (
    id                       bigserial PRIMARY KEY,
    code                     text NOT NULL,
    name                     text NOT NULL,
    category                 text NOT NULL,
    default_duration_minutes integer,
    price                    numeric(12, 2) NOT NULL DEFAULT 0 CHECK (price >= 0),
    billable                 boolean NOT NULL DEFAULT true,
    status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    version                  integer NOT NULL DEFAULT 1,
    created_by               bigint,
    updated_by               bigint,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    deleted_at               timestamptz
);
CREATE UNIQUE INDEX procedures_code_key ON procedures (code) WHERE deleted_at IS NULL;

CREATE TABLE insurances (
    id               bigserial PRIMARY KEY,
    code             text NOT NULL,
    payer_name       text NOT NULL,
    plan_name        text,
    coverage_percent numeric(5, 2) NOT NULL CHECK (coverage_percent BETWEEN 0 AND 100),
    copay            numeric(12, 2) NOT NULL DEFAULT 0 CHECK (copay >= 0),
    valid_from       date NOT NULL,
    valid_to         date CHECK (valid_to >= valid_from),
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX insurances_code_key ON insurances (code) WHERE deleted_at IS NULL;

CREATE TABLE services (
    id                       bigserial PRIMARY KEY,
    code                     text NOT NULL,
    name                     text NOT NULL,
    description              text,
    price                    numeric(12, 2) NOT NULL CHECK (price >= 0),
    default_duration_minutes integer,
    status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    version                  integer NOT NULL DEFAULT 1,
    created_by               bigint,
    updated_by               bigint,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    deleted_at               timestamptz
);
CREATE UNIQUE INDEX services_code_key ON services (code) WHERE deleted_at IS NULL;

CREATE TABLE doctors (
    id               bigserial PRIMARY KEY,
    first_name       text NOT NULL,
    last_name        text NOT NULL,
    specialization   text,
    license_no       text NOT NULL,
    phone            text,
    email            text,
    user_id          bigint REFERENCES users,
    consultation_fee numeric(12, 2) NOT NULL DEFAULT 0 CHECK (consultation_fee >= 0),
    active           boolean NOT NULL DEFAULT true,
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX doctors_license_no_key ON doctors (lower(license_no)) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX doctors_user_id_key ON doctors (user_id) WHERE deleted_at IS NULL;

-- Branch-bound: a surgery of a patient of one branch, by a doctor who may operate anywhere.
CREATE TABLE surgery_schedules (
    id               bigserial PRIMARY KEY,
    branch_id        bigint NOT NULL REFERENCES branches,
    -- A patient of the branch's schema, checked by the server on write.
    patient_id       bigint NOT NULL,
    procedure_id     bigint NOT NULL REFERENCES procedures,
    doctor_id        bigint NOT NULL REFERENCES doctors,
    eye              text NOT NULL,
    scheduled_at     timestamptz NOT NULL,
    duration_minutes integer NOT NULL CHECK (duration_minutes BETWEEN 5 AND 720),
    -- scheduled_at + duration, kept by trigger for the exclusion constraints.
    ends_at          timestamptz NOT NULL,
    theatre          text,
    anaesthesia      text,
    priority         text NOT NULL DEFAULT 'routine',
    status           text NOT NULL DEFAULT 'scheduled',
    cancel_reason    text,
    notes            text,
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    -- Two active schedules never overlap for one doctor, or for one theatre of a branch, even
    -- under concurrent writes.
    CONSTRAINT surgery_schedules_doctor_overlap EXCLUDE USING gist (
        doctor_id WITH =, tstzrange(scheduled_at, ends_at) WITH &&
    ) WHERE (status IN ('scheduled', 'confirmed') AND deleted_at IS NULL),
    CONSTRAINT surgery_schedules_theatre_overlap EXCLUDE USING gist (
        branch_id WITH =, (lower(btrim(theatre))) WITH =, tstzrange(scheduled_at, ends_at) WITH &&
    ) WHERE (status IN ('scheduled', 'confirmed') AND deleted_at IS NULL AND btrim(theatre) <> '')
);
CREATE INDEX surgery_schedules_branch_idx ON surgery_schedules (branch_id, scheduled_at) WHERE deleted_at IS NULL;

-- The duration defaults to the procedure's, else an hour; the end follows the start.
CREATE FUNCTION surgery_schedule_times() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.duration_minutes IS NULL THEN
        NEW.duration_minutes := coalesce(
            (SELECT default_duration_minutes FROM procedures WHERE id = NEW.procedure_id), 60);
    END IF;
    NEW.ends_at := NEW.scheduled_at + make_interval(mins => NEW.duration_minutes);
    RETURN NEW;
END
$$;
CREATE TRIGGER surgery_schedules_times BEFORE INSERT OR UPDATE ON surgery_schedules
    FOR EACH ROW EXECUTE FUNCTION surgery_schedule_times();

-- Branches get a time zone: "today" for queues, numbering and dashboards is local.
ALTER TABLE branches ADD COLUMN timezone text NOT NULL DEFAULT 'UTC';
-- A branch service may name the clinical service it offers.
ALTER TABLE branch_services ADD COLUMN service_id bigint REFERENCES services;

INSERT INTO payment_methods (code, name, requires_reference) VALUES
    ('CASH', 'Cash', false), ('CARD', 'Card', true), ('BANK_TRANSFER', 'Bank transfer', true),
    ('CHEQUE', 'Cheque', true), ('E_WALLET', 'E-wallet', true);
INSERT INTO bill_item_categories (name) VALUES
    ('Consultation'), ('Diagnostics'), ('Procedures'), ('Medicines'), ('Optical'), ('Other');

-- Answers kept for Idempotency-Key replays of POSTs on registry resources (24 hours).
CREATE TABLE idempotency_keys (
    user_id     bigint NOT NULL,
    path        text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    status      integer,
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path, key)
);

-- Server-made document numbers of registry documents, per branch, series and local year.
CREATE TABLE document_counters (
    branch_id bigint NOT NULL REFERENCES branches,
    series    text NOT NULL,
    year      integer NOT NULL,
    last      bigint NOT NULL,
    PRIMARY KEY (branch_id, series, year)
);
