--
-- A lane's head (its last position and hash) is a row that the appending transaction holds
-- until it commits, through the commit's flush to disk: with one head, a branch's writers
-- would commit one at a time. There are 32 lanes; a writer takes the first one no other
-- transaction holds (an advisory lock tried, never waited on while one is free), so writers
-- wait on each other only when every lane is being committed through.
ALTER TABLE audit_log ADD COLUMN chain_lane smallint, ADD COLUMN chain_position bigint,
                      ADD COLUMN chain_hash bytea;
CREATE INDEX audit_log_chain_idx ON audit_log (chain_lane, chain_position, id);

