#!/usr/bin/env bash
# What the audit log's hash chain costs the writers of one branch: POST /patients from
# CONNECTIONS clients into branch MAIN, against one server, alternately with the chain's
# trigger disabled on this benchmark's database (`ALTER TABLE ... DISABLE TRIGGER
# audit_log_chain`: the writes as they were before the chain) and enabled, ROUNDS times
# each. Prints both throughputs (the mean of the rounds) and their ratio.
#
#   ops/bench/audit_chain.sh      # CONNECTIONS (32), DURATION (10s), ROUNDS (4), PROFILE, PGURL
#
# PGURL must be a cluster with fsync on (the default, 127.0.0.1:5432): the head's lock is
# held through each commit's flush, which is what the chain could cost.
set -euo pipefail
cd "$(dirname "$0")/../.."

CONNECTIONS=${CONNECTIONS:-32}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-4}
PORT=${PORT:-18097}
NAME=audit_chain
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh

read -r BRANCH SCHEMA <<<"$(psql "$DB_URL" -Atc "SELECT id, schema_name FROM branches WHERE code = 'MAIN'" | tr '|' ' ')"
echo "fsync $(psql "$DB_URL" -Atc 'SHOW fsync'), $CONNECTIONS connections, $DURATION a round, $PROFILE build"
chain() { psql "$DB_URL" -qc "ALTER TABLE $SCHEMA.audit_log $1 TRIGGER audit_log_chain"; }
# Requests per second of one round; stops the benchmark if any answer was not a 201.
round() {
  local out
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$1" -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" \
    -H 'Content-Type: application/json' -s ops/bench/create_patient.lua "$BASE")
  if echo "$out" | grep -q 'Non-2xx'; then echo "answers other than 201: $out" >&2; exit 1; fi
  echo "$out" | awk '/Requests\/sec/ {print $2}'
}

round 3s >/dev/null # warm-up
off=()
on=()
# Off then on, on then off, and so on: a drift of the host's load over the run (the tables
# grow, other work comes and goes) weighs on both alike.
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    chain DISABLE
    off+=("$(round "$DURATION")")
    chain ENABLE
    on+=("$(round "$DURATION")")
  else
    on+=("$(round "$DURATION")")
    chain DISABLE
    off+=("$(round "$DURATION")")
    chain ENABLE
  fi
  echo "round $r: chain off ${off[-1]} req/s, chain on ${on[-1]} req/s"
done
mean() { printf '%s\n' "$@" | awk '{s += $1} END {printf "%.1f", s / NR}'; }
OFF=$(mean "${off[@]}")
ON=$(mean "${on[@]}")
echo "POST /patients, one branch: chain off $OFF req/s, chain on $ON req/s, ratio $(awk "BEGIN {printf \"%.3f\", $ON / $OFF}")"
# The chain alone, without the server: CONNECTIONS pgbench clients each committing one audit
# record as a unit appends it (the worst case: a transaction that does nothing else), on the
# server's setting. Off and on alternately, as above.
cat >/tmp/audit_chain_$$.sql <<SQL
\set id random(1, 1000000)
BEGIN;
INSERT INTO $SCHEMA.audit_log (user_id, action, resource, record_id, before, after, route)
SELECT * FROM unnest(ARRAY[1]::bigint[], ARRAY['create'], ARRAY['patients'], ARRAY[:id]::bigint[],
                     ARRAY[NULL]::jsonb[], ARRAY['{"first_name": "Bench", "last_name": "Writer", "sex": "female"}']::jsonb[],
                     ARRAY['POST /api/v1/patients']);
COMMIT;
SQL
sql_round() {
  PGOPTIONS="-c clinic.audit_chain=on" "${CLIENT[@]}" pgbench -n -c "$CONNECTIONS" -j 2 -T "${SQL_DURATION:-5}" \
    -f /tmp/audit_chain_$$.sql "$DB_URL" 2>/dev/null | awk '/^tps/ {printf "%.1f", $3}'
}
sql_off=()
sql_on=()
for r in $(seq 1 "$ROUNDS"); do
  chain DISABLE
  sql_off+=("$(sql_round)")
  chain ENABLE
  sql_on+=("$(sql_round)")
done
rm -f /tmp/audit_chain_$$.sql
OFF=$(mean "${sql_off[@]}")
ON=$(mean "${sql_on[@]}")
echo "audit record commits alone: chain off $OFF tps, chain on $ON tps, ratio $(awk "BEGIN {printf \"%.3f\", $ON / $OFF}")"

# The rounds with the chain on linked every record they wrote, each lane gapless.
psql "$DB_URL" -At <<SQL
SELECT format('chained records: %s in %s lanes; every lane gapless: %s', sum(n), count(*), bool_and(n = top))
  FROM (SELECT count(*) AS n, max(chain_position) AS top FROM $SCHEMA.audit_log
         WHERE chain_position IS NOT NULL GROUP BY chain_lane) l;
SQL
