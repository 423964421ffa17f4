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
