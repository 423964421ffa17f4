# Sourced by the benchmarks that need one server: builds the release binary, starts it on a
# fresh database of the PostgreSQL at PGURL (dropped on exit) on PORT, waits until it answers
# (or stops with its log) and logs in as the administrator. Sets TARGET, DB_URL, BASE,
# PASSWORD, SERVER and TOKEN.
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
TARGET=${CARGO_TARGET_DIR:-target}
DB=clinic_bench_$$
DB_URL="${PGURL%/*}/$DB"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1
SERVER_LOG=/tmp/clinic-bench-$PORT.log

cargo build --release --quiet
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT

DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" \
  RATE_LIMIT_API_PER_MINUTE=100000000 RUST_LOG=warn "$TARGET/release/clinic-server" serve >"$SERVER_LOG" 2>&1 &
SERVER=$!
for _ in $(seq 1 300); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done
curl -sf "$BASE/public/health" >/dev/null || { echo "the server did not start: $(tail -5 "$SERVER_LOG")"; exit 1; }

TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')
