-- The hours a doctor really keeps on given local days, read by both the availability search
-- and the check of a booking; what an arrival made; and recalls, the patients to bring back.

-- The doctor's open hours on each local day from first_day to last_day in `zone`, as
-- instants (so that a day of a daylight-saving change has the hours it really has), each
-- with the slot length of the hours it comes from:
-- - the weekly schedule valid that day, unless the doctor's own open exception changes the
--   day's hours, when those hours are the day's instead;
-- - within a whole-branch open exception's hours, on its days (the branch keeps shorter
--   hours: Christmas Eve until noon);
-- - less every closed exception of the doctor or the whole branch (all day without hours).
CREATE FUNCTION doctor_hours(doctor bigint, first_day date, last_day date, zone text)
RETURNS TABLE (hours tstzrange, slot_minutes integer)
LANGUAGE sql STABLE ROWS 20 AS $$
    WITH days AS (
        SELECT d::date AS day FROM generate_series(first_day, last_day, interval '1 day') d
    ),
    exceptions AS (
        SELECT days.day, x.doctor_id, x.closed,
               CASE WHEN x.start_time IS NOT NULL
                    THEN tstzrange((days.day + x.start_time::time) AT TIME ZONE zone,
                                   (days.day + x.end_time::time) AT TIME ZONE zone) END AS hours,
               tstzrange(days.day::timestamp AT TIME ZONE zone,
                         (days.day + 1)::timestamp AT TIME ZONE zone) AS whole_day
          FROM days
          JOIN schedule_exceptions x
            ON x.deleted_at IS NULL AND (x.doctor_id IS NULL OR x.doctor_id = doctor)
           AND days.day BETWEEN x.starts_on AND x.ends_on
    ),
    usual_slot AS (
        SELECT coalesce(min(s.slot_minutes), 15) AS minutes
          FROM doctor_schedules s WHERE s.deleted_at IS NULL AND s.doctor_id = doctor
    ),
    open AS (
        SELECT tstzrange((days.day + s.start_time::time) AT TIME ZONE zone,
                         (days.day + s.end_time::time) AT TIME ZONE zone) AS hours,
               s.slot_minutes
          FROM days
          JOIN doctor_schedules s
            ON s.deleted_at IS NULL AND s.doctor_id = doctor
           AND s.weekday = extract(isodow FROM days.day)
           AND days.day BETWEEN coalesce(s.effective_from, days.day) AND coalesce(s.effective_to, days.day)
         WHERE NOT EXISTS (SELECT 1 FROM exceptions e
                            WHERE e.day = days.day AND e.doctor_id IS NOT NULL AND NOT e.closed)
        UNION ALL
        SELECT e.hours, u.minutes FROM exceptions e, usual_slot u
         WHERE e.doctor_id IS NOT NULL AND NOT e.closed
    ),
    shut AS (
        -- Closed hours, and the rest of the days a whole-branch exception shortens.
        SELECT coalesce(range_agg(h), '{}'::tstzmultirange) AS hours
          FROM (SELECT coalesce(e.hours, e.whole_day) AS h
                  FROM exceptions e WHERE e.closed
                UNION ALL
                SELECT unnest(tstzmultirange(e.whole_day) - range_agg(e.hours) OVER (PARTITION BY e.day))
                  FROM exceptions e WHERE e.doctor_id IS NULL AND NOT e.closed) closed
    )
    SELECT piece, o.slot_minutes
      FROM open o, shut, unnest(tstzmultirange(o.hours) - shut.hours) AS piece
     WHERE NOT isempty(piece)
$$;

-- The slots of those hours: one after another from the start of each stretch, each as long
-- as the hours' slot_minutes.
CREATE FUNCTION doctor_slots(doctor bigint, first_day date, last_day date, zone text)
RETURNS TABLE (starts_at timestamptz, ends_at timestamptz)
LANGUAGE sql STABLE ROWS 300 AS $$
    SELECT s, s + make_interval(mins => h.slot_minutes)
      FROM doctor_hours(doctor, first_day, last_day, zone) h,
           generate_series(lower(h.hours), upper(h.hours) - make_interval(mins => h.slot_minutes),
                           make_interval(mins => h.slot_minutes)) s
$$;

-- Resolved in the branch's schema whatever the caller's search_path (as every function of
-- the schema, tenants/V2); a function with its own path is also planned on its own, by the
-- row counts declared above, rather than inlined into the search.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION doctor_hours(bigint, date, date, text) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION doctor_slots(bigint, date, date, text) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema());
END
$$;

-- A recall: a patient to bring back on a day ("glaucoma check in 12 months"), often made
-- from a visit. It is booked when an appointment is made from it and done when that
-- appointment completes; a booking cancelled or missed puts it back to pending.
CREATE TABLE recalls (
    id                bigserial PRIMARY KEY,
    patient_id        bigint NOT NULL REFERENCES patients,
    due_on            date NOT NULL,
    reason            text NOT NULL,
    doctor_id         bigint,
    branch_service_id bigint,
    patient_visit_id  bigint REFERENCES patient_visits,
    status            text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'booked', 'done', 'cancelled')),
    appointment_id    bigint REFERENCES appointments,
    notes             text,
    cancelled_at      timestamptz,
    cancel_reason     text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    CHECK ((status = 'booked') <= (appointment_id IS NOT NULL))
);
CREATE INDEX recalls_due_idx ON recalls (due_on) WHERE deleted_at IS NULL;
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX recalls_patient_idx ON recalls (patient_id, due_on);
CREATE TRIGGER recalls_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON recalls
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();

-- What an appointment was made from, and what its arrival made.
ALTER TABLE appointments
    ADD COLUMN recall_id        bigint REFERENCES recalls,
    ADD COLUMN patient_visit_id bigint REFERENCES patient_visits,
    ADD COLUMN queue_ticket_id  bigint REFERENCES queue_tickets;
-- One appointment per recall at a time (a cancelled one lets it be booked again).
CREATE UNIQUE INDEX appointments_recall_key ON appointments (recall_id)
    WHERE recall_id IS NOT NULL AND deleted_at IS NULL AND status NOT IN ('cancelled', 'no_show');
-- The availability search reads one doctor's appointments over a range.
CREATE INDEX appointments_doctor_starts_idx ON appointments (doctor_id, starts_at) WHERE deleted_at IS NULL;
