-- The registry's audit log as a hash chain, as every branch's (tenants/V21): each record
-- carries its position in the log and a SHA-256 over its content and the previous record's
-- hash, so that a record changed, removed or slipped in afterwards shows
-- (`clinic-server audit verify`). The head (the last position
-- and hash) is one row, locked by the writing transaction from its audit records to its
-- commit: the writers of one log take their turn there and nowhere else.
ALTER TABLE audit_log ADD COLUMN chain_position bigint, ADD COLUMN chain_hash bytea;
CREATE INDEX audit_log_chain_idx ON audit_log (chain_position, id);

-- A dropped branch's trail keeps its links.
ALTER TABLE dropped_branch_audit_log ADD COLUMN chain_position bigint, ADD COLUMN chain_hash bytea;

CREATE TABLE audit_chain_head (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_position bigint NOT NULL,
    last_hash     bytea NOT NULL
);
INSERT INTO audit_chain_head (last_position, last_hash) VALUES (0, '\x');

-- The months archived (`clinic-server audit archive`), as runs of consecutive positions:
-- a verify goes on after a run from its last hash. A month is usually one run; a record of
-- a month's last moments written after the next month's first is another.
CREATE TABLE audit_log_archived (
    first_position bigint PRIMARY KEY,
    last_position  bigint NOT NULL,
    records        bigint NOT NULL,
    last_hash      bytea NOT NULL,
    month          text NOT NULL,
    archived_at    timestamptz NOT NULL DEFAULT now()
);

-- Links a new record, when the connection writing it is the server's (its connections
-- start with `clinic.audit_chain=on`); any other insert gets no link, and a verify names it.
-- The content hashed is a JSON array of every column, `at` as UTC text: jsonb's text is
-- canonical, and nothing depends on the session's TimeZone or DateStyle.
CREATE FUNCTION audit_log_chain() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('clinic.audit_chain', true) = 'on' THEN
        UPDATE audit_chain_head h
           SET last_position = h.last_position + 1,
               last_hash = sha256(h.last_hash || convert_to(jsonb_build_array(
                   h.last_position + 1, NEW.id, to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
                   NEW.user_id, NEW.action, NEW.resource, NEW.record_id, NEW.before, NEW.after, NEW.route)::text,
                   'UTF8'))
        RETURNING h.last_position, h.last_hash INTO NEW.chain_position, NEW.chain_hash;
    ELSE
        NEW.chain_position := NULL;
        NEW.chain_hash := NULL;
    END IF;
    RETURN NEW;
END
$$;
ALTER FUNCTION audit_log_chain() SET search_path = pg_catalog, public, pg_temp;
CREATE TRIGGER audit_log_chain BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_chain();

-- The records so far are chained in the order they were written.
DO $$
DECLARE
    r record;
    pos bigint := 0;
    link bytea := '\x';
BEGIN
    FOR r IN SELECT * FROM audit_log ORDER BY at, id LOOP
        pos := pos + 1;
        link := sha256(link || convert_to(jsonb_build_array(
            pos, r.id, to_char(r.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
            r.user_id, r.action, r.resource, r.record_id, r.before, r.after, r.route)::text, 'UTF8'));
        UPDATE audit_log SET chain_position = pos, chain_hash = link WHERE id = r.id AND at = r.at;
    END LOOP;
    UPDATE audit_chain_head SET last_position = pos, last_hash = link;
END
$$;
