#!/usr/bin/env bash
# Point-in-time recovery drill with pgBackRest, on a private cluster:
#   1. a new cluster archives its WAL into a pgBackRest repository; clinic-server migrates
#      it (the registry, branch MAIN) and a second branch is created through the API;
#   2. a full backup;
#   3. patients are written through the API, each acknowledged id kept; the database's
#      clock is read between two batches: that is the moment to restore to;
#   4. the cluster is stopped and restored into a new data directory with
#      `pgbackrest restore --type=time --target=<moment> --target-action=promote`;
#   5. clinic-server serves the restored cluster: every patient acknowledged before the
#      moment must answer 200, every one after it 404, and the branch schemas must hold
#      exactly the first batch.
# Exits non-zero when any check fails; prints a summary.
#
# Usage: ops/backup/pitr-drill.sh [path/to/clinic-server]
#   CLINIC_SERVER  the binary (default: the argument, else target/debug/clinic-server)
#   DRILL_DIR      where the cluster, repository and logs go (default: var/pitr-drill-<pid>),
#                  removed at the end unless KEEP=1 or the drill failed
#   BATCH          patients per batch (default 10)
#   PG_BIN_DIR     the folder of initdb and pg_ctl (default: pg_config --bindir, else the
#                  newest /usr/lib/postgresql/*/bin)
# Run as root, PostgreSQL and pgBackRest run as the postgres user.
set -euo pipefail
cd "$(dirname "$0")/../.."

started=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
CLINIC_SERVER=${CLINIC_SERVER:-${1:-target/debug/clinic-server}}
BATCH=${BATCH:-10}
DRILL_DIR=${DRILL_DIR:-$PWD/var/pitr-drill-$$}
STANZA=drill
PASSWORD='Drill-Admin-Password-1'

die() { echo "pitr-drill: FAILED: $*" >&2; exit 1; }
note() { printf '[%6ss] %s\n' "$(since "$started")" "$*"; }

command -v pgbackrest >/dev/null || die "pgbackrest is not installed (apt-get install pgbackrest)"
[ -x "$CLINIC_SERVER" ] || die "no clinic-server binary at $CLINIC_SERVER"
CLINIC_SERVER=$(realpath "$CLINIC_SERVER")
if [ -z "${PG_BIN_DIR:-}" ]; then
  PG_BIN_DIR=$(pg_config --bindir 2>/dev/null || true)
  [ -x "$PG_BIN_DIR/initdb" ] || PG_BIN_DIR=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
[ -x "$PG_BIN_DIR/initdb" ] || die "no initdb found: set PG_BIN_DIR"

# PostgreSQL refuses to run as root: as root, the cluster and the repository belong to postgres.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

mkdir -p "$DRILL_DIR"
DRILL_DIR=$(realpath "$DRILL_DIR")
DATA=$DRILL_DIR/data
RESTORED=$DRILL_DIR/restored
RUN=$DRILL_DIR/run
CONF=$DRILL_DIR/pgbackrest.conf
mkdir -p "$RUN" "$DRILL_DIR/repo" "$DRILL_DIR/log" "$DRILL_DIR/lock" "$DRILL_DIR/spool"
cat >"$CONF" <<EOF
[global]
repo1-path=$DRILL_DIR/repo
repo1-retention-full=1
log-path=$DRILL_DIR/log
lock-path=$DRILL_DIR/lock
spool-path=$DRILL_DIR/spool
start-fast=y
archive-timeout=30
compress-type=none
process-max=2
log-level-console=warn
log-level-file=info

[$STANZA]
pg1-path=$DATA
pg1-socket-path=$RUN
pg1-port=5432
EOF
if [ "$(id -u)" = 0 ]; then chown -R postgres: "$DRILL_DIR"; fi

SERVER_PID=
cleanup() {
  local status=$?
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  for dir in "$DATA" "$RESTORED"; do
    [ -f "$dir/postmaster.pid" ] && as_pg "$PG_BIN_DIR/pg_ctl" stop -D "$dir" -m immediate -w >/dev/null 2>&1
  done
  if [ "$status" = 0 ] && [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$DRILL_DIR"
  else
    echo "pitr-drill: logs and data kept in $DRILL_DIR" >&2
  fi
}
trap cleanup EXIT

BR="pgbackrest --config=$CONF --stanza=$STANZA"
URL="host=$RUN port=5432 user=postgres dbname=clinic"
psql_at() { psql "host=$RUN port=5432 user=postgres dbname=${2:-clinic}" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

pg_start() { # data directory, extra options
  as_pg "$PG_BIN_DIR/pg_ctl" start -w -t 60 -D "$1" -l "$DRILL_DIR/$(basename "$1").log" \
    -o "-c listen_addresses='' -k $RUN -p 5432 -c fsync=off -c max_connections=60 $2" >/dev/null \
    || die "PostgreSQL did not start in $1 (see $DRILL_DIR/$(basename "$1").log)"
}

# clinic-server serving $URL; sets BASE and TOKEN.
serve() {
  local log=$DRILL_DIR/server-$1.log
  DATABASE_URL=$URL BIND_ADDR=127.0.0.1:0 CLINIC_ADMIN_PASSWORD=$PASSWORD \
    PASSWORD_HASH_MEMORY_KIB=8 PASSWORD_HASH_WEAK_FOR_TESTS=true RUST_LOG=info NO_COLOR=1 \
    "$CLINIC_SERVER" serve >"$log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + 60))
  BASE=
  while [ -z "$BASE" ]; do
    kill -0 "$SERVER_PID" 2>/dev/null || die "clinic-server exited (see $log)"
    [ $SECONDS -lt $deadline ] || die "clinic-server did not listen within 60 s (see $log)"
    BASE=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | sed 's/listening on //') || true
    [ -n "$BASE" ] || sleep 0.1
  done
  TOKEN=$(curl -sf "$BASE/api/v1/auth/login" -H 'Content-Type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | json data.token) || die "login failed"
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" || true; SERVER_PID=; }

# A field of the JSON on stdin, by dotted path.
json() { python3 -c 'import json,sys
v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[int(k)] if isinstance(v,list) else v[k]
print(v)' "$1"; }

api() { # method path [body]: the answer's body in $BODY, its status in $STATUS
  STATUS=$(curl -s -o "$DRILL_DIR/answer" -w '%{http_code}' -X "$1" "$BASE$2" \
    -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $MAIN" -H 'Content-Type: application/json' \
    ${3:+-d "$3"})
  BODY=$(cat "$DRILL_DIR/answer")
}

# 1. The cluster, archiving into the repository, migrated by clinic-server.
as_pg "$PG_BIN_DIR/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
ARCHIVING="-c wal_level=replica -c archive_mode=on -c archive_timeout=10"
ARCHIVING+=" -c archive_command='pgbackrest --config=$CONF --stanza=$STANZA archive-push %p'"
pg_start "$DATA" "$ARCHIVING"
psql_at "CREATE DATABASE clinic" postgres
as_pg $BR stanza-create >/dev/null || die "stanza-create failed (see $DRILL_DIR/log)"
serve first
MAIN=$(psql_at "SELECT id FROM branches WHERE code = 'MAIN'")
api POST /api/v1/branches '{"code":"SOUTH","name":"South Branch"}'
[ "$STATUS" = 201 ] || die "creating branch SOUTH answered $STATUS: $BODY"
note "cluster migrated by clinic-server; branches MAIN ($MAIN) and SOUTH"

# 2. A full backup.
t=$(date +%s.%N)
as_pg $BR --type=full backup || die "the backup failed (see $DRILL_DIR/log)"
backup_s=$(since "$t")
note "full backup in ${backup_s}s"

# 3. Two batches of acknowledged writes, the moment read between them.
write_batch() { # name file
  local i id
  for i in $(seq 1 "$BATCH"); do
    api POST /api/v1/patients \
      "{\"first_name\":\"$1\",\"last_name\":\"Drill$i\",\"birth_date\":\"1990-01-01\",\"sex\":\"female\"}"
    [ "$STATUS" = 201 ] || die "writing a patient answered $STATUS: $BODY"
    id=$(printf '%s' "$BODY" | json data.id)
    echo "$id $(date -u +%FT%T.%N)" >>"$2"
  done
}
write_batch Before "$DRILL_DIR/before.ids"
TARGET=$(psql_at "SELECT clock_timestamp()")
write_batch After "$DRILL_DIR/after.ids"
note "$BATCH patients acknowledged before $TARGET, $BATCH after"
# The WAL of the second batch reaches the repository: check switches the segment and waits.
as_pg $BR check >/dev/null || die "the WAL did not reach the repository (see $DRILL_DIR/log)"
stop_server
as_pg "$PG_BIN_DIR/pg_ctl" stop -D "$DATA" -m fast -w >/dev/null

# 4. Restore into a new data directory, to the moment, and promote.
t=$(date +%s.%N)
mkdir -p "$RESTORED" && chmod 700 "$RESTORED"
[ "$(id -u)" = 0 ] && chown postgres: "$RESTORED"
as_pg $BR --pg1-path="$RESTORED" restore --type=time --target="$TARGET" --target-action=promote \
  || die "the restore failed (see $DRILL_DIR/log)"
pg_start "$RESTORED" ""
deadline=$((SECONDS + 60))
until [ "$(psql_at 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; do
  [ $SECONDS -lt $deadline ] || die "the restored cluster was not promoted within 60 s"
  sleep 0.1
done
restore_s=$(since "$t")
note "restored to $TARGET and promoted in ${restore_s}s"

# 5. The restored cluster through clinic-server: the first batch there, the second not.
serve restored
present=0 missing=0 wrong=()
while read -r id _; do
  api GET "/api/v1/patients/$id"
  if [ "$STATUS" = 200 ]; then present=$((present + 1)); else wrong+=("before:$id:$STATUS"); fi
done <"$DRILL_DIR/before.ids"
while read -r id _; do
  api GET "/api/v1/patients/$id"
  if [ "$STATUS" = 404 ]; then missing=$((missing + 1)); else wrong+=("after:$id:$STATUS"); fi
done <"$DRILL_DIR/after.ids"
rows=$(psql_at "SELECT count(*) FROM branch_$MAIN.patients")
south=$(psql_at "SELECT count(*) FROM branches b JOIN pg_namespace n ON n.nspname = 'branch_' || b.id
                 WHERE b.code = 'SOUTH'")
stop_server

cat <<EOF
pitr-drill summary
  full backup           ${backup_s}s
  restore and promote   ${restore_s}s
  target                $TARGET
  before the target     $present of $BATCH acknowledged patients present
  after the target      $missing of $BATCH acknowledged patients absent
  rows in branch_$MAIN    $rows (expected $BATCH)
  branch SOUTH schema   $([ "$south" = 1 ] && echo restored || echo MISSING)
  total                 $(since "$started")s
EOF
[ ${#wrong[@]} -eq 0 ] || die "unexpected answers: ${wrong[*]}"
[ "$present" = "$BATCH" ] && [ "$missing" = "$BATCH" ] && [ "$rows" = "$BATCH" ] && [ "$south" = 1 ] \
  || die "the restored cluster does not hold exactly the writes acknowledged before the target"
echo "pitr-drill: OK"
