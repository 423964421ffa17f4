-- Keys a doctor's calendar application subscribes to their appointments at one branch with
-- (`GET /calendar/doctors/{id}.ics?key=...`): read-only, revocable, never a user's token.
-- Only SHA-256 of the secret is kept; the secret is shown once, when the key is made. Patient
-- names are in the feed only when the key says so. Revoked keys stay listed.
CREATE TABLE calendar_keys (
    id                    bigserial PRIMARY KEY,
    doctor_id             bigint NOT NULL REFERENCES doctors,
    branch_id             bigint NOT NULL REFERENCES branches,
    name                  text,
    include_patient_names boolean NOT NULL DEFAULT false,
    secret_hash           bytea NOT NULL UNIQUE,
    last_used_at          timestamptz,
    revoked_at            timestamptz,
    version               integer NOT NULL DEFAULT 1,
    created_by            bigint,
    updated_by            bigint,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX calendar_keys_doctor_idx ON calendar_keys (doctor_id, branch_id, created_at);
