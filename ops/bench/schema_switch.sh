#!/usr/bin/env bash
# What a branch pool's affinity saves per request: the same list statement on one
# connection (pgbench, simple protocol), its latency when the connection is already on the
# branch's schema (a checkout that found an idle connection on it: no switch), when
# `SET search_path` goes in a round trip of its own before it, and when the switch rides in
# the statement's round trip (`BEGIN; SET search_path; ...; COMMIT`, as `db::Reads` sends
# it). Each request of the switching cases moves between two branches' schemas, as a pool
# that hands out any idle connection would on nearly every request. ROUNDS rounds of the
# three cases in turn; prints each case's median latency over the rounds.
#
#   ops/bench/schema_switch.sh    # PGURL (127.0.0.1:5432), DURATION (10 s), ROUNDS (5)
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-5}
DB=clinic_bench_switch_$$
DB_URL="${PGURL%/*}/$DB"
WORK=$(mktemp -d)
trap 'psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB" >/dev/null; rm -rf "$WORK"' EXIT

psql "$PGURL" -qc "CREATE DATABASE $DB"
for schema in branch_1 branch_2; do
  psql "$DB_URL" -q <<SQL
CREATE SCHEMA $schema;
CREATE TABLE $schema.patients (id bigint PRIMARY KEY, last_name text NOT NULL, first_name text NOT NULL, born date);
CREATE INDEX ON $schema.patients (last_name, id);
INSERT INTO $schema.patients SELECT i, 'Last ' || i, 'First ' || i, date '1980-01-01' + i FROM generate_series(1, 20) i;
ANALYZE $schema.patients;
SQL
done

LIST="SELECT json_agg(p) FROM (SELECT * FROM patients ORDER BY last_name, id LIMIT 20) p"
echo "$LIST;" >"$WORK/on_schema.sql"
printf '%s\n' "\\set n random(1, 2)" "SET search_path TO branch_:n;" "$LIST;" >"$WORK/switch_alone.sql"
printf '%s\n' "\\set n random(1, 2)" "BEGIN \\; SET search_path TO branch_:n \\; $LIST \\; COMMIT;" \
  >"$WORK/switch_with_read.sql"

# Mean latency in ms of one case (pgbench's own figure).
run() {
  PGOPTIONS='-c search_path=branch_1' pgbench -n -M simple -c 1 -T "$DURATION" -f "$WORK/$1.sql" "$DB_URL" 2>/dev/null |
    sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
}
declare -A seen
for _ in $(seq 1 "$ROUNDS"); do
  for case in on_schema switch_alone switch_with_read; do
    latency=$(run "$case")
    echo "$case: $latency ms"
    seen[$case]="${seen[$case]:-} $latency"
  done
done
# The median round of each case: a shared machine's rounds swing.
for case in on_schema switch_alone switch_with_read; do
  printf '%s\n' ${seen[$case]} | sort -n | awk -v c="$case" '{ v[NR] = $1 }
    END { printf "%-17s %4.0f µs a request (median of %d rounds, %.0f to %.0f)\n", c, v[int((NR + 1) / 2)] * 1000, NR, v[1] * 1000, v[NR] * 1000 }'
done
