-- E-mail addresses are compared in one form, decided here: surrounding blanks dropped and
-- ASCII letters folded, nothing else. lower() folds look-alikes too (the KELVIN SIGN becomes
-- k, a dotted capital I becomes i), which let a stranger's address match an account.
CREATE FUNCTION email_key(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT translate(btrim($1), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') $$;

DROP INDEX users_email_key;
CREATE UNIQUE INDEX users_email_key ON users (email_key(email));

-- Wrong password-reset codes per account, across codes: after 10 in an hour every reset
-- step of the account is refused until the hour is over.
CREATE TABLE password_reset_failures (
    id      bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX password_reset_failures_user_idx ON password_reset_failures (user_id, at);

-- The registry's audit log is listed by date and by user (/system-audit-logs).
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_user_idx ON audit_log (user_id, at);
