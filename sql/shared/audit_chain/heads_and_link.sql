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
