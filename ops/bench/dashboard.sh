#!/usr/bin/env bash
# The five dashboards on a large branch: 100,000 patients and 300,000 visits.
#
#   ops/bench/dashboard.sh           # 2 threads x 8 connections, 10 s per case
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL
# (default postgres://postgres@127.0.0.1:5432/postgres), seeds COUNT patients and VISITS
# visits (with queue tickets, billing rows and surgeries) into branch MAIN and runs wrk
# against each endpoint. Needs wrk and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT=${COUNT:-100000}
VISITS=${VISITS:-300000}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18092}
DB=clinic_bench_$$
DB_URL="${PGURL%/*}/$DB"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1
TARGET=${CARGO_TARGET_DIR:-target}

cargo build --release --quiet
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT

DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" \
  RATE_LIMIT_API_PER_MINUTE=100000000 RUST_LOG=warn "$TARGET/release/clinic-server" serve >/tmp/clinic-bench.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done

# Registry rows: four branch services for the queue; 2,000 surgeries over the last year
# and the next 30 days.
psql "$DB_URL" -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO branch_services (branch_id, name, code)
SELECT 1, 'Bench service ' || s, 'BENCH' || s FROM generate_series(1, 4) AS s;
INSERT INTO procedures (code, name, category) VALUES ('PHACO', 'Phacoemulsification', 'major_surgery');
INSERT INTO doctors (first_name, last_name, license_no) VALUES ('Ana', 'Reyes', 'LIC-1');
INSERT INTO surgery_schedules (branch_id, patient_id, procedure_id, doctor_id, scheduled_at, duration_minutes, eye, theatre, status)
SELECT 1, 1 + i * 37 % 100000, (SELECT id FROM procedures LIMIT 1), (SELECT id FROM doctors LIMIT 1),
       date_trunc('hour', now()) - interval '365 days' + i * interval '4 hours 30 minutes', 30, 'right', 'OR-' || (i % 3),
       (ARRAY['scheduled','confirmed','completed','cancelled'])[1 + i % 4]
  FROM generate_series(1, 2000) AS i;
SQL
start=$(date +%s.%N)
echo "seeding $COUNT patients and $VISITS visits..."
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -v schema=branch_1 -v visits="$VISITS" -f ops/bench/seed_dashboard.sql
echo "seeded in $(echo "$(date +%s.%N) - $start" | bc) s"

TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')

run() {
  local name=$1 path=$2
  local out
  curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' "$BASE$path" \
    || { echo "$name: $path does not answer 200"; exit 1; }
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" \
        -H 'X-Branch-Id: 1' -H 'Accept: application/json' "$BASE$path")
  printf '%-40s %10s req/s   p50 %8s   p99 %8s\n' "$name" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')"
}

YEAR_AGO=$(date -d '-365 days' +%F)
MONTH_AGO=$(date -d '-30 days' +%F)
TODAY=$(date +%F)
echo
run "stats, today"                          "/dashboard/stats"
run "stats, 30 days"                        "/dashboard/stats?start_date=$MONTH_AGO&end_date=$TODAY"
run "stats, 366 days"                       "/dashboard/stats?start_date=$YEAR_AGO&end_date=$TODAY"
run "calendar, 30 days"                     "/dashboard/calendar?start_date=$MONTH_AGO&end_date=$TODAY"
run "calendar, 366 days"                    "/dashboard/calendar?start_date=$YEAR_AGO&end_date=$TODAY"
run "patient-flow, today (600 tickets)"     "/dashboard/patient-flow"
run "upcoming-surgeries, 30 days"           "/dashboard/upcoming-surgeries?days=30"
run "patient-demographics, all"             "/dashboard/patient-demographics"
run "patient-demographics, 30 days"         "/dashboard/patient-demographics?start_date=$MONTH_AGO&end_date=$TODAY"
