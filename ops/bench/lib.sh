# Sourced by every benchmark that runs the server. Set PORT first, and NAME to tell its
# database apart. Builds the release binary, makes a fresh database of the PostgreSQL at
# PGURL and drops it on exit (after the script's own `on_exit`, if it defines one); with
# KEEP_DB, a benchmark that offers it uses that database, makes it only if it is missing
# (KEPT is then empty) and keeps it. Sets PGURL, DB, DB_URL, BASE, PASSWORD, BIN, SERVE,
# SERVER_LOG, KEPT and CLIENT; defines start_server, stop_server, sign_in and cleanup.
#
# With PG_CPUS and CLIENT_CPUS (taskset lists: PG_CPUS=0 CLIENT_CPUS=1), every process of
# PostgreSQL's cluster, and each backend it starts later, runs on PG_CPUS, and the server
# and whatever the benchmark runs through `"${CLIENT[@]}"` (its wrk and pgbench) on
# CLIENT_CPUS: a host where the database has cores of its own. PostgreSQL gets its CPUs back
# on exit. Pinning the cluster's processes needs root. Unset, all share the machine's cores.
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=${KEEP_DB:-clinic_bench_${NAME:+${NAME}_}$$}
DB_URL="${PGURL%/*}/$DB"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1
# PROFILE=debug runs the debug build instead of building for release (a comparison made
# within one run, on a host where a release build is too slow to make).
PROFILE=${PROFILE:-release}
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE/clinic-server
# What start_server runs with `serve`: the binary, or a command that runs one (valgrind ...).
SERVE=("$BIN")
CLIENT=()
SERVER_LOG=${SERVER_LOG:-/tmp/clinic-bench-${NAME:-$PORT}.log}
# How long a start may take before the benchmark gives up.
STARTUP_SECONDS=${STARTUP_SECONDS:-60}

if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi

# Puts every running PostgreSQL process (threads included) on the CPUs $1.
pin_postgres() {
  local pid
  for pid in $(ps -C postgres -o pid=); do taskset -a -p -c "$1" "$pid" >/dev/null 2>&1 || true; done
}
KEPT=$(psql "$PGURL" -Atc "SELECT 1 FROM pg_database WHERE datname = '$DB'")
[ -n "$KEPT" ] || psql "$PGURL" -qc "CREATE DATABASE $DB"

# Starts `${SERVE[@]} serve` on the database with the limits lifted, with any VAR=value
# arguments in its environment, and waits until it answers; stops the benchmark with the
# end of its log if it does not.
start_server() {
  env "$@" DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" \
    RATE_LIMIT_API_PER_MINUTE=100000000 RUST_LOG=warn "${SERVE[@]}" serve >>"$SERVER_LOG" 2>&1 &
  SERVER=$!
  local tries=$((STARTUP_SECONDS * 5))
  for _ in $(seq 1 "$tries"); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done
  curl -sf "$BASE/public/health" >/dev/null || { echo "the server did not start: $(tail -5 "$SERVER_LOG")"; exit 1; }
}
stop_server() {
  if [ -n "${SERVER:-}" ]; then kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null || true; fi
  SERVER=
}
# Signs in as the administrator: sets TOKEN.
sign_in() {
  TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
    -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')
}
cleanup() {
  stop_server
  if declare -F on_exit >/dev/null; then on_exit; fi
  if [ -n "${PG_CPUS_BEFORE:-}" ]; then pin_postgres "$PG_CPUS_BEFORE"; fi
  [ -n "${KEEP_DB:-}" ] || psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT

# Pinned only once cleanup is sure to give PostgreSQL its CPUs back.
if [ -n "${PG_CPUS:-}" ]; then
  : "${CLIENT_CPUS:?set CLIENT_CPUS beside PG_CPUS}"
  CLIENT=(taskset -c "$CLIENT_CPUS")
  SERVE=("${CLIENT[@]}" "$BIN")
  # The postmaster's CPUs, which its backends inherit: restored on exit.
  PG_CPUS_BEFORE=$(taskset -p -c "$(pgrep -o -x postgres)" | awk '{print $NF}')
  pin_postgres "$PG_CPUS"
fi

# Nearest-rank percentile of the numbers in a file, one per line.
percentile() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999999); print v[i < 1 ? 1 : i] }'; }
