-- Appointment reminders: an outbox of the messages each booking is due, written in the
-- booking's transaction and sent by the server's reminder worker. A patient may decline them.

ALTER TABLE patients ADD COLUMN reminders_opt_out boolean NOT NULL DEFAULT false;

CREATE TABLE appointment_reminders (
    id              bigserial PRIMARY KEY,
    appointment_id  bigint NOT NULL REFERENCES appointments,
    -- When the reminder is meant to go: the appointment's start less one configured offset.
    due_at          timestamptz NOT NULL,
    channel         text NOT NULL DEFAULT 'email' CHECK (channel IN ('email')),
    status          text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sent', 'failed', 'withdrawn')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When a worker may next try it: the due time, or later after a failed attempt.
    next_attempt_at timestamptz NOT NULL,
    -- Why it was withdrawn or failed, or what the last failed attempt met.
    reason          text,
    sent_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'sent') = (sent_at IS NOT NULL))
);
-- What a worker claims: pending rows by the time they may be tried.
CREATE INDEX appointment_reminders_due_idx ON appointment_reminders (next_attempt_at) WHERE status = 'pending';
CREATE INDEX appointment_reminders_appointment_idx ON appointment_reminders (appointment_id);
-- One pending reminder per appointment and time, even if a booking were queued twice.
CREATE UNIQUE INDEX appointment_reminders_pending_key ON appointment_reminders (appointment_id, due_at)
    WHERE status = 'pending';
