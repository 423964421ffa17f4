# Sourced by the patient benchmarks: builds the release binary, starts it on a fresh database
# of the PostgreSQL at PGURL (dropped on exit), seeds COUNT patients into branch MAIN with
# `seed_patients.sql`, and logs in. Sets DB_URL, BASE, SERVER and TOKEN.
COUNT=${COUNT:-100000}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=clinic_bench_$$
DB_URL="${PGURL%/*}/$DB"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1

cargo build --release --quiet
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT

DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" \
  RATE_LIMIT_API_PER_MINUTE=100000000 RUST_LOG=warn "${CARGO_TARGET_DIR:-target}/release/clinic-server" serve >/tmp/clinic-bench.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done

echo "seeding $COUNT patients..."
start=$(date +%s.%N)
psql "$DB_URL" -q -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
echo "seeded in $(echo "$(date +%s.%N) - $start" | bc) s"

TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')
