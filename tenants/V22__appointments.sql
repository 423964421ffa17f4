-- Appointments: a doctor's weekly hours at the branch, the days those hours do not hold, and
-- the appointments booked in them. Doctors and branch services are registry rows, checked by
-- the server on write.

CREATE TABLE doctor_schedules (
    id             bigserial PRIMARY KEY,
    doctor_id      bigint NOT NULL,
    -- ISO weekday: 1 Monday .. 7 Sunday.
    weekday        integer NOT NULL CHECK (weekday BETWEEN 1 AND 7),
    start_time     text NOT NULL CHECK (start_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    end_time       text NOT NULL CHECK (end_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    slot_minutes   integer NOT NULL DEFAULT 15 CHECK (slot_minutes BETWEEN 5 AND 480),
    effective_from date,
    effective_to   date,
    version        integer NOT NULL DEFAULT 1,
    created_by     bigint,
    updated_by     bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    CHECK (end_time > start_time),
    CHECK (effective_to >= effective_from),
    -- One doctor's hours on one weekday never overlap while their validity overlaps, even
    -- under concurrent writes. Checked after each statement, or (a branch's rows copied
    -- again during a move, in any order) at commit.
    CONSTRAINT doctor_schedules_overlap EXCLUDE USING gist (
        doctor_id WITH =,
        weekday WITH =,
        int4range(split_part(start_time, ':', 1)::int * 60 + split_part(start_time, ':', 2)::int,
                  split_part(end_time, ':', 1)::int * 60 + split_part(end_time, ':', 2)::int) WITH &&,
        daterange(effective_from, effective_to, '[]') WITH &&
    ) WHERE (deleted_at IS NULL) DEFERRABLE INITIALLY IMMEDIATE
);

-- Days a doctor (or, without one, the whole branch) keeps other hours: closed all day or for
-- some hours, or open for hours the weekly schedule does not have.
CREATE TABLE schedule_exceptions (
    id          bigserial PRIMARY KEY,
    doctor_id   bigint,
    starts_on   date NOT NULL,
    ends_on     date NOT NULL,
    closed      boolean NOT NULL DEFAULT true,
    start_time  text CHECK (start_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    end_time    text CHECK (end_time ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
    reason      text,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    CHECK (ends_on >= starts_on),
    CHECK ((start_time IS NULL) = (end_time IS NULL)),
    CHECK (end_time > start_time),
    CHECK (closed OR start_time IS NOT NULL)
);
CREATE INDEX schedule_exceptions_days_idx ON schedule_exceptions (starts_on, ends_on) WHERE deleted_at IS NULL;

CREATE TABLE appointments (
    id                bigserial PRIMARY KEY,
    patient_id        bigint NOT NULL REFERENCES patients,
    doctor_id         bigint NOT NULL,
    branch_service_id bigint NOT NULL,
    starts_at         timestamptz NOT NULL,
    ends_at           timestamptz NOT NULL,
    duration_minutes  integer NOT NULL CHECK (duration_minutes BETWEEN 5 AND 720),
    reason            text,
    notes             text,
    -- Booked over another appointment or outside the doctor's hours, by someone allowed to.
    overbooked        boolean NOT NULL DEFAULT false,
    overbook_reason   text,
    status            text NOT NULL DEFAULT 'booked'
        CHECK (status IN ('booked', 'arrived', 'in_progress', 'completed', 'cancelled', 'no_show')),
    arrived_at        timestamptz,
    started_at        timestamptz,
    completed_at      timestamptz,
    cancelled_at      timestamptz,
    cancelled_by      bigint,
    cancel_reason     text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    CHECK (ends_at > starts_at),
    CHECK (NOT overbooked OR btrim(overbook_reason) <> ''),
    -- Two active appointments of one doctor never overlap unless one was overbooked, even
    -- under concurrent bookings; a reschedule frees its old range in its own transaction.
    -- Deferrable like the hours' constraint above.
    CONSTRAINT appointments_doctor_overlap EXCLUDE USING gist (
        doctor_id WITH =, tstzrange(starts_at, ends_at) WITH &&
    ) WHERE (status IN ('booked', 'arrived', 'in_progress') AND NOT overbooked AND deleted_at IS NULL)
      DEFERRABLE INITIALLY IMMEDIATE
);
CREATE INDEX appointments_starts_idx ON appointments (starts_at) WHERE deleted_at IS NULL;
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX appointments_patient_idx ON appointments (patient_id, starts_at);
-- No row is written for a patient merged into another (tenants/V15).
CREATE TRIGGER appointments_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON appointments
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();
