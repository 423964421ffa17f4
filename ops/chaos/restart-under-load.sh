#!/usr/bin/env bash
# PostgreSQL restarts under a write load; the server must answer 201 or 503 (with
# Retry-After), never 500, keep every write it acknowledged, and serve again by itself.
#
#   ops/chaos/restart-under-load.sh          # 8 writers, restart after 3 s, 3 s of load after
#
# Starts a private PostgreSQL cluster (under var/, on a free TCP port of 127.0.0.1; as the
# `postgres` user when run as root) and the server on a fresh database in it, runs WRITERS
# curl loops posting patients, each recording every status and every acknowledged id, and
# restarts the cluster with `pg_ctl restart -m fast` mid-run. Then it checks the answers, that
# every acknowledged id is in the database, that the invalidation listener is back, that a new
# write goes through, and that the server drains and exits 0 on SIGTERM. Exits non-zero when
# a check fails. Settings: WRITERS (8), BEFORE and AFTER (seconds of load around the
# restart, 3 and 3), CLINIC_BIN (default: the release build, built when missing), PG_BIN_DIR,
# KEEP=1 to keep the folder (logs, answers) afterwards.
set -euo pipefail
cd "$(dirname "$0")/../.."

WRITERS=${WRITERS:-8}
BEFORE=${BEFORE:-3}
AFTER=${AFTER:-3}
PASSWORD=chaos-password-1
BIN=${CLINIC_BIN:-${CARGO_TARGET_DIR:-target}/release/clinic-server}
if [ -z "${CLINIC_BIN:-}" ] && [ ! -x "$BIN" ]; then cargo build --release --quiet; fi

PG_BIN_DIR=${PG_BIN_DIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -x "$PG_BIN_DIR/pg_ctl" ] || { echo "no pg_ctl: set PG_BIN_DIR" >&2; exit 2; }

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    ss -Htln "sport = :$port" | grep -q . || { echo "$port"; return; }
  done
}

mkdir -p var
DIR=$(mktemp -d "$PWD/var/chaos-XXXXXX")
PGPORT=$(free_port)
PORT=$(free_port)
BASE="http://127.0.0.1:$PORT/api/v1"
as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_ctl() { as_postgres "$PG_BIN_DIR/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" "$@"; }
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"
sql() { psql "postgres://postgres@127.0.0.1:$PGPORT/clinic" -XAtqc "$1"; }

cleanup() {
  touch "$DIR/stop"
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  pg_ctl stop -m immediate >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

as_postgres "$PG_BIN_DIR/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
OPTIONS="-c listen_addresses=127.0.0.1 -p $PGPORT -k $DIR"
pg_ctl start -w -o "$OPTIONS" >/dev/null
psql "postgres://postgres@127.0.0.1:$PGPORT/postgres" -Xqc "CREATE DATABASE clinic"

DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/clinic" BIND_ADDR="127.0.0.1:$PORT" \
  CLINIC_ADMIN_PASSWORD="$PASSWORD" PASSWORD_HASH_MEMORY_KIB=1024 PASSWORD_HASH_WEAK_FOR_TESTS=true RATE_LIMIT_API_PER_MINUTE=100000000 \
  SHUTDOWN_GRACE_SECONDS=10 RUST_LOG=warn,clinic_server=info NO_COLOR=1 \
  "$BIN" serve >"$DIR/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 300); do curl -sf "$BASE/public/ready" >/dev/null && break; sleep 0.2; done
curl -sf "$BASE/public/ready" >/dev/null || { echo "the server did not start; see $DIR/server.log" >&2; KEEP=1; exit 1; }

TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | jq -r .data.token)
BRANCH=$(sql "SELECT id FROM branches WHERE code = 'MAIN'")
SCHEMA=$(sql "SELECT schema_name FROM branches WHERE code = 'MAIN'")

# One writer: posts patients until told to stop; one line per answer: status, whether it
# carried Retry-After, the created id (or -), the time.
writer() {
  local w=$1 n=0 status id retry
  while [ ! -e "$DIR/stop" ]; do
    n=$((n + 1))
    status=$(curl -s -o "$DIR/body-$w" -D "$DIR/head-$w" -w '%{http_code}' -X POST "$BASE/patients" \
      -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: w$w-$n" \
      -d "{\"first_name\":\"W$w\",\"last_name\":\"N$n\",\"birth_date\":\"1980-01-02\",\"sex\":\"female\"}") || status=000
    id=-
    [ "$status" = 201 ] && id=$(jq -r .data.id "$DIR/body-$w")
    retry=$(grep -qi '^retry-after:' "$DIR/head-$w" && echo yes || echo no)
    echo "$status $retry $id $(date +%s.%N)" >>"$DIR/answers-$w"
    if [ "$status" != 201 ] && [ "$status" != 503 ]; then cp "$DIR/body-$w" "$DIR/unexpected-$w-$n"; fi
  done
}
for w in $(seq 1 "$WRITERS"); do writer "$w" & done

sleep "$BEFORE"
echo "restarting PostgreSQL (pg_ctl restart -m fast) under $WRITERS writers..."
RESTART_AT=$(date +%s.%N)
pg_ctl restart -w -m fast -o "$OPTIONS" >/dev/null
RESTARTED_AT=$(date +%s.%N)
sleep "$AFTER"
touch "$DIR/stop"
wait $(jobs -p | grep -v "^$SERVER$") 2>/dev/null || true

cat "$DIR"/answers-* >"$DIR/answers"
FAILED=0
check() { # description, condition result (0 = holds)
  if [ "$2" = 0 ]; then echo "ok    $1"; else echo "FAIL  $1"; FAILED=1; fi
}
echo
echo "answers by status:"
awk '{print $1}' "$DIR/answers" | sort | uniq -c | awk '{printf "  %s: %s\n", $2, $1}'
awk -v from="$RESTART_AT" '$1 == 503 && $4 >= from {print $4}' "$DIR/answers" | sort -n | \
  awk 'NR == 1 {first = $1} {last = $1} END {if (NR) printf "503s: %d, from %.2f s to %.2f s after the restart began\n", NR, first - '"$RESTART_AT"', last - '"$RESTART_AT"'}'
printf 'pg_ctl restart took %.2f s\n' "$(echo "$RESTARTED_AT - $RESTART_AT" | bc)"
FIRST_OK=$(awk -v from="$RESTARTED_AT" '$1 == 201 && $4 >= from {print $4}' "$DIR/answers" | sort -n | head -1)
[ -n "$FIRST_OK" ] && printf 'first 201 %.2f s after PostgreSQL was back\n' "$(echo "$FIRST_OK - $RESTARTED_AT" | bc)"
echo
check "no answer was a 500" "$(grep -q '^500 ' "$DIR/answers" && echo 1 || echo 0)"
check "every answer was 201, or 503 with Retry-After" \
  "$(awk '!($1 == 201 || ($1 == 503 && $2 == "yes")) {bad++} END {print bad ? 1 : 0}' "$DIR/answers")"
ACKED=$(awk '$1 == 201 {print $3}' "$DIR/answers" | sort -n)
ACKED_COUNT=$(echo "$ACKED" | grep -c . || true)
FOUND=$(sql "SELECT count(*) FROM $SCHEMA.patients WHERE id = ANY('{$(echo "$ACKED" | paste -sd,)}'::bigint[])")
check "all $ACKED_COUNT acknowledged writes are in the database ($FOUND found)" "$([ "$FOUND" = "$ACKED_COUNT" ] && echo 0 || echo 1)"
check "writes were acknowledged after the restart" "$([ -n "$FIRST_OK" ] && echo 0 || echo 1)"
LISTENING=0
for _ in $(seq 1 100); do
  LISTENING=$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'clinic-server-listener'")
  [ "$LISTENING" = 1 ] && break
  sleep 0.1
done
check "the invalidation listener is connected again" "$([ "$LISTENING" = 1 ] && echo 0 || echo 1)"
STATUS=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/patients" -H "Authorization: Bearer $TOKEN" \
  -H "X-Branch-Id: $BRANCH" -H 'Content-Type: application/json' \
  -d '{"first_name":"After","last_name":"Restart","birth_date":"1980-01-02","sex":"female"}')
check "a new write is answered 201 ($STATUS)" "$([ "$STATUS" = 201 ] && echo 0 || echo 1)"
check "readiness is 200" "$(curl -sf "$BASE/public/ready" >/dev/null && echo 0 || echo 1)"
kill -TERM "$SERVER"
CODE=0
wait "$SERVER" || CODE=$?
SERVER=
check "SIGTERM: the server drained and exited 0 ($CODE)" "$([ "$CODE" = 0 ] && echo 0 || echo 1)"
if [ "$FAILED" != 0 ]; then KEEP=1; echo "logs and answers kept in $DIR"; fi
exit "$FAILED"
