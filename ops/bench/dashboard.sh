#!/usr/bin/env bash
# The five dashboards on a large branch: 100,000 patients and 300,000 visits.
#
#   ops/bench/dashboard.sh           # 2 threads x 8 connections, 10 s per case
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL
# (default postgres://postgres@127.0.0.1:5432/postgres), seeds COUNT patients and VISITS
# visits (with queue tickets, billing rows, surgeries and MOVEMENTS stock movements) into
# branch MAIN and runs wrk against each endpoint, then, in the same run, pgbench sending the
# statements that endpoint sends (ops/bench/dashboard_sql/, the same connections and time)
# and the ratio of the two rates. Needs wrk, pgbench and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT=${COUNT:-100000}
VISITS=${VISITS:-300000}
MOVEMENTS=${MOVEMENTS:-1000000}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18092}
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh

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
# Pharmacy: 500 items, 20 lots each at branch 1 expiring over two years, MOVEMENTS receipts
# spread over the lots (each lot's level is its movements' sum); a third of the items low.
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -v movements="$MOVEMENTS" <<'SQL'
INSERT INTO pharmacy_items (code, name, unit, sale_price, reorder_level)
SELECT 'ITEM' || i, 'Item ' || i, 'box', 10, CASE WHEN i % 3 = 0 THEN 1000000 ELSE 1 END FROM generate_series(1, 500) AS i;
INSERT INTO stock_availables (branch_id, pharmacy_item_id, lot_no, expiry_date)
SELECT 1, it.id, 'LOT' || l, current_date + ((it.id * 7 + l * 37) % 730)::int FROM pharmacy_items it, generate_series(1, 20) AS l;
INSERT INTO stock_movements (branch_id, stock_available_id, pharmacy_item_id, kind, quantity, quantity_after, reason)
SELECT 1, a.id, a.pharmacy_item_id, 'receipt', 2, 2 * k, 'Seed'
  FROM stock_availables a, generate_series(1, :movements / 10000) AS k;
UPDATE stock_availables a SET on_hand = m.level
  FROM (SELECT stock_available_id, sum(quantity) AS level FROM stock_movements GROUP BY 1) m WHERE m.stock_available_id = a.id;
VACUUM ANALYZE pharmacy_items;
VACUUM ANALYZE stock_availables;
VACUUM ANALYZE stock_movements;
SQL
start=$(date +%s.%N)
echo "seeding $COUNT patients and $VISITS visits..."
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -v schema=branch_1 -v visits="$VISITS" -f ops/bench/seed_dashboard.sql
echo "seeded in $(echo "$(date +%s.%N) - $start" | bc) s"

SQL_DIR=ops/bench/dashboard_sql
ZONE=$(psql "$DB_URL" -Atc 'SELECT timezone FROM branches WHERE id = 1')
YEAR_AGO=$(date -d '-365 days' +%F)
MONTH_AGO=$(date -d '-30 days' +%F)
TODAY=$(date +%F)
# The first request of each dashboard finds the registrations' zone unset and counts them.
echo "first dashboard read (registrations counted): $(curl -s -o /tmp/clinic-bench-first.json -w '%{http_code} %{time_total} s' -H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' "$BASE/dashboard/stats")"

# name, path, pgbench script and its range ("" for none).
run() {
  local name=$1 path=$2 script=$3 start=${4:-$TODAY} end=${5:-$TODAY}
  local out sql api tps
  curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' "$BASE$path" \
    || { echo "$name: $path does not answer 200"; exit 1; }
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" \
        -H 'X-Branch-Id: 1' -H 'Accept: application/json' "$BASE$path")
  api=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  sql=$(PGOPTIONS='-c search_path=branch_1,public' pgbench -n -M prepared -c "$CONNECTIONS" -j 2 -T "${DURATION%s}" \
        -D start="$start" -D end="$end" -D today="$TODAY" -D tz="$ZONE" -f "$SQL_DIR/$script" "$DB_URL" 2>&1)
  tps=$(echo "$sql" | awk '/^tps/ {print $3}')
  [ -n "$tps" ] || { echo "$name: pgbench failed: $sql"; exit 1; }
  printf '%-40s %9s req/s  p50 %8s  p99 %8s | SQL %9s tx/s  API/SQL %5s\n' "$name" "$api" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')" \
    "$(printf '%.0f' "$tps")" "$(echo "scale=2; $api / $tps" | bc)"
}

echo
run "stats, today"                          "/dashboard/stats"                                             stats.sql
run "stats, 30 days"                        "/dashboard/stats?start_date=$MONTH_AGO&end_date=$TODAY"       stats.sql "$MONTH_AGO"
run "stats, 366 days"                       "/dashboard/stats?start_date=$YEAR_AGO&end_date=$TODAY"        stats.sql "$YEAR_AGO"
run "calendar, 30 days"                     "/dashboard/calendar?start_date=$MONTH_AGO&end_date=$TODAY"    calendar.sql "$MONTH_AGO"
run "calendar, 366 days"                    "/dashboard/calendar?start_date=$YEAR_AGO&end_date=$TODAY"     calendar.sql "$YEAR_AGO"
run "patient-flow, today (600 tickets)"     "/dashboard/patient-flow"                                      flow.sql
run "upcoming-surgeries, 30 days"           "/dashboard/upcoming-surgeries?days=30"                        upcoming.sql
run "patient-demographics, all"             "/dashboard/patient-demographics"                              demographics.sql
run "patient-demographics, 30 days"         "/dashboard/patient-demographics?start_date=$MONTH_AGO&end_date=$TODAY" demographics_ranged.sql "$MONTH_AGO"
run "patient-demographics, 366 days"        "/dashboard/patient-demographics?start_date=$YEAR_AGO&end_date=$TODAY"  demographics_ranged.sql "$YEAR_AGO"
