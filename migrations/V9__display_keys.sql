-- Keys that waiting-room screens show one branch service's queue with: read-only, revocable,
-- never a user's token. Only SHA-256 of the secret is kept; the secret is shown once, when
-- the key is made. Revoked keys stay listed (who made them, when they were last used).
CREATE TABLE display_keys (
    id                bigserial PRIMARY KEY,
    branch_service_id bigint NOT NULL REFERENCES branch_services ON DELETE CASCADE,
    name              text NOT NULL,
    secret_hash       bytea NOT NULL UNIQUE,
    last_used_at      timestamptz,
    revoked_at        timestamptz,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX display_keys_service_idx ON display_keys (branch_service_id, created_at);
