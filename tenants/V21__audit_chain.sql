-- The audit log as hash chains: each record carries its lane, its position in the lane and
-- a SHA-256 over its content and the hash of the lane's previous record, so that a record
-- changed, removed or slipped in afterwards shows (`clinic-server audit verify`).
--
-- A lane's head (its last position and hash) is a row that the appending transaction holds
-- until it commits, through the commit's flush to disk: with one head, a branch's writers
-- would commit one at a time. There are 32 lanes; a writer takes the first one no other
-- transaction holds (an advisory lock tried, never waited on while one is free), so writers
-- wait on each other only when every lane is being committed through.
ALTER TABLE audit_log ADD COLUMN chain_lane smallint, ADD COLUMN chain_position bigint,
                      ADD COLUMN chain_hash bytea;
CREATE INDEX audit_log_chain_idx ON audit_log (chain_lane, chain_position, id);

CREATE TABLE audit_chain_head (
    lane          smallint PRIMARY KEY,
    last_position bigint NOT NULL,
    last_hash     bytea NOT NULL
);
INSERT INTO audit_chain_head (lane, last_position, last_hash)
SELECT lane, 0, '\x' FROM generate_series(0, 31) AS lane;

-- The months archived (`clinic-server audit archive`), as runs of consecutive positions of a
-- lane: a verify goes on after a run from its last hash. A month is usually one run a lane;
-- a record of a month's last moments written after the next month's first is another.
CREATE TABLE audit_log_archived (
    lane           smallint NOT NULL,
    first_position bigint NOT NULL,
    last_position  bigint NOT NULL,
    records        bigint NOT NULL,
    last_hash      bytea NOT NULL,
    month          text NOT NULL,
    archived_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lane, first_position)
);

-- Links a new record, when the connection writing it is the server's (its connections
-- start with `clinic.audit_chain=on`); any other insert gets no link, and a verify names it.
-- The content hashed is a JSON array of every column, `at` as UTC text: jsonb's text is
-- canonical, and nothing depends on the session's TimeZone or DateStyle.
CREATE FUNCTION audit_log_chain() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    -- The lanes' advisory locks, keyed by this log's head table.
    head_key integer := 'audit_chain_head'::regclass::oid::integer;
    lanes constant integer := 32;
    chosen integer;
BEGIN
    IF current_setting('clinic.audit_chain', true) IS DISTINCT FROM 'on' THEN
        NEW.chain_lane := NULL;
        NEW.chain_position := NULL;
        NEW.chain_hash := NULL;
        RETURN NEW;
    END IF;
    FOR lane IN 0..lanes - 1 LOOP
        IF pg_try_advisory_xact_lock(head_key, lane) THEN
            chosen := lane;
            EXIT;
        END IF;
    END LOOP;
    IF chosen IS NULL THEN
        chosen := floor(random() * lanes);
        PERFORM pg_advisory_xact_lock(head_key, chosen);
    END IF;
    UPDATE audit_chain_head h
       SET last_position = h.last_position + 1,
           last_hash = sha256(h.last_hash || convert_to(jsonb_build_array(
               h.lane, h.last_position + 1, NEW.id, to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
               NEW.user_id, NEW.action, NEW.resource, NEW.record_id, NEW.before, NEW.after, NEW.route)::text,
               'UTF8'))
     WHERE h.lane = chosen
    RETURNING h.lane, h.last_position, h.last_hash INTO NEW.chain_lane, NEW.chain_position, NEW.chain_hash;
    RETURN NEW;
END
$$;
DO $$ BEGIN EXECUTE format('ALTER FUNCTION audit_log_chain() SET search_path = pg_catalog, %I, pg_temp',
                           current_schema()); END $$;
CREATE TRIGGER audit_log_chain BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_chain();

-- The records so far are chained in lane 0, in the order they were written.
DO $$
DECLARE
    r record;
    pos bigint := 0;
    link bytea := '\x';
BEGIN
    FOR r IN SELECT * FROM audit_log ORDER BY at, id LOOP
        pos := pos + 1;
        link := sha256(link || convert_to(jsonb_build_array(
            0, pos, r.id, to_char(r.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
            r.user_id, r.action, r.resource, r.record_id, r.before, r.after, r.route)::text, 'UTF8'));
        UPDATE audit_log SET chain_lane = 0, chain_position = pos, chain_hash = link
         WHERE id = r.id AND at = r.at;
    END LOOP;
    UPDATE audit_chain_head SET last_position = pos, last_hash = link WHERE lane = 0;
END
$$;
