-- A second factor: a TOTP secret per user (RFC 6238), one-time recovery codes, and the wrong
-- codes counted per account so that every instance refuses past the same limit.

-- One row per user who started an enrolment; `enabled_at` is set when a code confirmed it.
-- `last_step` is the last TOTP time step accepted (unix time / 30): a code of that step or an
-- earlier one is refused, so no code is accepted twice, whichever instance sees it.
CREATE TABLE user_totp (
    user_id    bigint PRIMARY KEY REFERENCES users ON DELETE CASCADE,
    secret     bytea NOT NULL,
    enabled_at timestamptz,
    last_step  bigint,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Recovery codes, SHA-256 of the user id and the code (80 random bits each: a slow hash adds
-- nothing); a used one keeps its row with `used_at`.
CREATE TABLE user_recovery_codes (
    user_id   bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    code_hash bytea NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- Wrong second-factor codes per account (login and turning the factor off): past the limit
-- in the window every attempt is refused (429) until the window has passed.
CREATE TABLE second_factor_failures (
    id      bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX second_factor_failures_user_idx ON second_factor_failures (user_id, at);
