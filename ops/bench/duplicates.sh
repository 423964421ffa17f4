#!/usr/bin/env bash
# The list of likely duplicate patients on a large branch.
#
#   ops/bench/duplicates.sh          # 100,000 patients, 2 threads x 8 connections, 10 s per case
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL
# (default postgres://postgres@127.0.0.1:5432/postgres), seeds COUNT patients into branch
# MAIN (`seed_patients.sql`: its names and birth dates repeat, about 123,000 pairs at
# 100,000), times the first read (which finds the pairs of every patient seeded), then runs
# wrk against each case. Needs wrk (apt-get install wrk) and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18091}
# shellcheck source=ops/bench/seeded_server.sh
source ops/bench/seeded_server.sh
H=(-H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' -H 'Accept: application/json')

first=$(curl -s -o /dev/null -w '%{time_total}' "${H[@]}" "$BASE/patients/duplicates")
total=$(curl -s "${H[@]}" "$BASE/patients/duplicates?perPage=1" | sed 's/.*"total":\([0-9]*\).*/\1/')
echo "first read, pairing all $COUNT patients: ${first} s; $total pairs"
# What autovacuum does soon after a bulk import: index-only counts need it.
psql "$DB_URL" -qc "VACUUM ANALYZE branch_1.patient_duplicate_pairs, branch_1.patient_duplicate_checks"

run() {
  local name=$1 path=$2 connections=${3:-$CONNECTIONS}
  local out
  out=$(wrk -t"$(( connections < 2 ? 1 : 2 ))" -c"$connections" -d"$DURATION" --latency "${H[@]}" "$BASE$path")
  printf '%-40s %10s req/s   p50 %8s   p99 %8s\n' "$name" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')"
}

echo
run "one client, first page"                 "/patients/duplicates" 1
run "one client, filters[reason]"             "/patients/duplicates?filters%5Breason%5D=same_name_and_birth_date" 1
run "duplicates, first page"                 "/patients/duplicates"
run "duplicates, page 500"                    "/patients/duplicates?page=500"
run "duplicates, 100 per page"                "/patients/duplicates?perPage=100"
run "duplicates, filters[reason]=same_phone"  "/patients/duplicates?filters%5Breason%5D=same_phone"
run "duplicates, filters[reason]=same_name..." "/patients/duplicates?filters%5Breason%5D=same_name_and_birth_date"
run "duplicates of one patient"               "/patients/duplicates?filters%5Bpatient_id%5D=50000"
run "duplicates, by patient_id asc"           "/patients/duplicates?sortField=patient_id&sortDirection=asc"

# A patient registered twice more while the list is read: the next read pairs them.
psql "$DB_URL" -q -c "INSERT INTO branch_1.patients (first_name, last_name, birth_date, sex, phone)
                      SELECT first_name, last_name, birth_date, sex, phone FROM branch_1.patients WHERE id = 777"
after=$(curl -s -o /dev/null -w '%{time_total}' "${H[@]}" "$BASE/patients/duplicates")
echo "read after one new registration: ${after} s"
