#!/usr/bin/env bash
# The free slots of one doctor over 31 days with 2,000 appointments booked: wrk through the
# API, then pgbench sending the search's own statement, in the same run.
#
#   ops/bench/availability.sh        # 8 connections, 10 s per side
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL; the
# doctor keeps 07:00 to 19:00 every day in slots of 15 minutes, in Europe/Berlin (a day of
# a daylight-saving change inside the month), with a closed afternoon, a branch holiday and
# a surgery; 2,000 appointments of 10 minutes are booked across the month. Needs wrk, pgbench,
# psql and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-8}
APPOINTMENTS=${APPOINTMENTS:-2000}
PORT=${PORT:-18099}
NAME=availability
WORK=$(mktemp -d)
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh
on_exit() { rm -rf "$WORK"; }

# The month searched: the next March, whose last Sunday moves the clocks forward.
YEAR=$(( $(date +%Y) + 1 ))
FROM="$YEAR-03-01"
TO="$YEAR-03-31"
psql "$DB_URL" -q -v from="$FROM" -v count="$APPOINTMENTS" <<'SQL'
UPDATE branches SET timezone = 'Europe/Berlin' WHERE id = 1;
INSERT INTO doctors (first_name, last_name, license_no) VALUES ('Rosa', 'Santos', 'BENCH-1');
INSERT INTO branch_services (branch_id, name, code) VALUES (1, 'Consultation', 'C');
INSERT INTO procedures (code, name, category) VALUES ('phaco', 'Phacoemulsification', 'major_surgery');
SET search_path TO branch_1;
INSERT INTO patients (first_name, last_name, birth_date, sex) VALUES ('Ana', 'Cruz', '1970-01-01', 'female');
INSERT INTO doctor_schedules (doctor_id, weekday, start_time, end_time, slot_minutes)
SELECT 1, d, '07:00', '19:00', 15 FROM generate_series(1, 7) d;
INSERT INTO schedule_exceptions (doctor_id, starts_on, ends_on, closed, start_time, end_time)
VALUES (1, (:'from')::date + 3, (:'from')::date + 3, true, '13:00', '19:00');
INSERT INTO schedule_exceptions (starts_on, ends_on, closed) VALUES ((:'from')::date + 10, (:'from')::date + 10, true);
-- 10 minutes every 11, from 07:00 to 19:00 local, over the month's days.
INSERT INTO appointments (patient_id, doctor_id, branch_service_id, starts_at, ends_at, duration_minutes)
SELECT 1, 1, 1, s, s + interval '10 minutes', 10
  FROM (SELECT ((:'from')::date + (i / 65))::timestamp + interval '7 hours' + (i % 65) * interval '11 minutes' AS local
          FROM generate_series(0, :count - 1) i) l,
       LATERAL (SELECT l.local AT TIME ZONE 'Europe/Berlin' AS s) x;
ANALYZE;
SET search_path TO public;
INSERT INTO surgery_schedules (branch_id, patient_id, procedure_id, doctor_id, eye, scheduled_at, duration_minutes, ends_at)
VALUES (1, 1, 1, 1, 'right', ((:'from')::date + 20 + time '15:00') AT TIME ZONE 'Europe/Berlin', 120,
        ((:'from')::date + 20 + time '17:00') AT TIME ZONE 'Europe/Berlin');
SQL
# The branch's zone was changed under the running server: start it again to read it afresh.
stop_server
start_server
sign_in
H=(-H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' -H 'Accept: application/json')
URL="$BASE/appointments/availability?doctor_id=1&from=$FROM&to=$TO"
slots=$(curl -s "${H[@]}" "$URL" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
echo "one doctor, $FROM to $TO, $APPOINTMENTS appointments booked: $slots free slots"

api=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${H[@]}" "$URL")
printf '%-34s %10s req/s   p50 %8s   p99 %8s\n' "API, GET /appointments/availability" \
  "$(echo "$api" | awk '/Requests\/sec/ {print $2}')" \
  "$(echo "$api" | awk '$1 == "50%" {print $2}')" \
  "$(echo "$api" | awk '$1 == "99%" {print $2}')"

# The same search as the statement the server sends (it also reads the doctor, the service's
# staff and the surgeries in the registry first, and cuts the slots from what it answers):
# `reading_hours(asked, then)` written out as `WITH asked AS (asked), <HOURS> then`.
python3 - "$FROM" "$TO" > "$WORK/free_slots.sql" <<'PY'
import re, sys
hours = open("src/appointments/hours.rs").read().split('const HOURS: &str = "')[1].split('";')[0]
search = open("src/appointments/availability.rs").read().split("static HOURS_AND_BOOKINGS")[1]
asked, then = re.findall(r'"([^"]*)"', search.split("reading_hours(")[1].split("\n    )\n")[0])[:2]
sql = f"WITH asked AS ({asked}),{hours} {then}"
first, last = sys.argv[1], sys.argv[2]
values = {"$1": "'{1}'", "$2": "NULL", "$3": f"'{first}'", "$4": "NULL", "$5": f"'{last}'",
          "$6": "'Europe/Berlin'", "$7": "7"}
for key, value in values.items():
    sql = sql.replace(key, value)
# The server reads the arrays in binary; pgbench would have them written out as text, which
# costs more than the search: the statement is counted instead.
sql = ("SELECT sum(cardinality(stretch_starts) + cardinality(busy_starts) + cardinality(busy_ends)) "
       f"FROM ({sql}) answered")
print(" ".join(re.sub(r"--[^\n]*", "", sql).split()) + ";")
PY
# Prepared and planned once, as the server runs it (`Reads::read_generic`).
pg=$(PGOPTIONS="-c search_path=branch_1 -c plan_cache_mode=force_generic_plan" \
  pgbench -n -M prepared -c "$CONNECTIONS" -j 2 -T "$DURATION" -f "$WORK/free_slots.sql" "$DB_URL" 2>&1)
printf '%-34s %10s tx/s    mean %6s ms\n' "SQL, the search's statement" \
  "$(echo "$pg" | awk '/^tps/ {printf "%.0f", $3}')" \
  "$(echo "$pg" | awk '/latency average/ {print $4}')"
