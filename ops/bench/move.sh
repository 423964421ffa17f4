#!/usr/bin/env bash
# Moving a live branch to a second PostgreSQL server, and back, while clients write to it.
#
#   ops/bench/move.sh            # 100,000 patients; 4 writers and 2 readers during each move
#                                # COUNT, PGURL, PROFILE (release; debug skips the release build)
#
# Starts a second cluster (initdb + pg_ctl on port SECOND_PORT, as the postgres user when
# run as root), a server on a fresh database of PGURL, seeds COUNT patients into branch
# MOVE, then runs `clinic-server branch move` there and back while curl loops write and
# read. Prints each move's report (rows copied, how long writes were frozen) and what the
# clients saw, then checks that every acknowledged write is on the branch's server.
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT=${COUNT:-100000}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18096}
SECOND_PORT=${SECOND_PORT:-5439}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
DB=clinic_bench_move_$$
DB_URL="${PGURL%/*}/$DB"
SECOND_DIR=$(mktemp -d /tmp/clinic-second-XXXX)
SECOND_URL="postgres://postgres@127.0.0.1:$SECOND_PORT/postgres"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1
PROFILE=${PROFILE:-release}
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE/clinic-server
OUT=$(mktemp -d)

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
[ "$(id -u)" = 0 ] && chown postgres "$SECOND_DIR"
as_postgres "$PG_BIN/initdb" -D "$SECOND_DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
as_postgres "$PG_BIN/pg_ctl" start -w -D "$SECOND_DIR/data" -l "$SECOND_DIR/log" \
  -o "-p $SECOND_PORT -k $SECOND_DIR -c listen_addresses=127.0.0.1" >/dev/null
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  pkill -P $$ curl 2>/dev/null || true
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
  as_postgres "$PG_BIN/pg_ctl" stop -m fast -D "$SECOND_DIR/data" >/dev/null || true
  rm -rf "$SECOND_DIR" "$OUT"
}
trap cleanup EXIT

export DATABASE_URL="$DB_URL" BRANCH_DATABASE_HOSTS=127.0.0.1 RUST_LOG=warn
BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" RATE_LIMIT_API_PER_MINUTE=100000000 \
  "$BIN" serve >/tmp/clinic-bench-move.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done
"$BIN" branch create --code MOVE --name "Moving Branch" >/dev/null
BRANCH=$(psql "$DB_URL" -Atc "SELECT id FROM branches WHERE code = 'MOVE'")
echo "seeding $COUNT patients into branch MOVE..."
psql "$DB_URL" -q -v schema="branch_$BRANCH" -v count="$COUNT" -f ops/bench/seed_patients.sql
TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')

# Writers record "status id" per answer; readers record the status.
writer() {
  local n=0
  while [ ! -e "$OUT/stop" ]; do
    n=$((n + 1))
    curl -s -o "$OUT/w$1.body" -w '%{http_code}\n' -X POST "$BASE/patients" \
      -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" -H 'Content-Type: application/json' \
      -d "{\"first_name\":\"Writer$1\",\"last_name\":\"Row$n\",\"birth_date\":\"1990-01-01\",\"sex\":\"female\"}" \
      >>"$OUT/w$1.status"
    if [ "$(tail -1 "$OUT/w$1.status")" = 201 ]; then
      grep -o '"id":[0-9]*' "$OUT/w$1.body" | head -1 | cut -d: -f2 >>"$OUT/acknowledged"
    fi
  done
}
reader() {
  while [ ! -e "$OUT/stop" ]; do
    curl -s -o /dev/null -w '%{http_code}\n' "$BASE/patients?perPage=15" \
      -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" >>"$OUT/r$1.status"
  done
}
for w in 1 2 3 4; do writer "$w" & done
for r in 1 2; do reader "$r" & done
sleep 2
echo
RUST_LOG=clinic_server::tenancy=info "$BIN" branch move --code MOVE --to "$SECOND_URL"
sleep 2
RUST_LOG=clinic_server::tenancy=info "$BIN" branch move --code MOVE --to "$DB_URL"
sleep 2
touch "$OUT/stop"
wait $(jobs -p | grep -v "$SERVER") 2>/dev/null || true

echo
echo "writes by status: $(cat "$OUT"/w*.status | sort | uniq -c | tr '\n' ' ')"
echo "reads by status:  $(cat "$OUT"/r*.status | sort | uniq -c | tr '\n' ' ')"
acknowledged=$(sort -u "$OUT/acknowledged" | wc -l)
stored=$(psql "$DB_URL" -Atc "SELECT count(*) FROM branch_$BRANCH.patients WHERE first_name LIKE 'Writer%'")
missing=$(psql "$DB_URL" -Atc "SELECT count(*) FROM unnest('{$(sort -u "$OUT/acknowledged" | paste -sd,)}'::bigint[]) a(id)
                                 WHERE NOT EXISTS (SELECT 1 FROM branch_$BRANCH.patients p WHERE p.id = a.id)")
echo "acknowledged writes: $acknowledged; rows found on the branch's server: $stored; acknowledged but missing: $missing"
psql "$DB_URL" -c "SELECT from_server, to_server, state, rows_copied, frozen_ms,
                          round(extract(epoch FROM finished_at - started_at)::numeric, 2) AS seconds
                     FROM branch_moves ORDER BY id"
[ "$missing" = 0 ] && [ "$acknowledged" = "$stored" ] || { echo "LOST WRITES"; exit 1; }
if grep -qv '^\(201\|503\)$' "$OUT"/w*.status; then echo "a write answered neither 201 nor 503"; exit 1; fi
