#!/usr/bin/env bash
# Patient list, search, lookup and export on a large branch.
#
#   ops/bench/patients.sh            # 100,000 patients, 2 threads x 8 connections, 10 s per case
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL
# (default postgres://postgres@127.0.0.1:5432/postgres), seeds COUNT patients into branch
# MAIN, and runs wrk against each case. Needs wrk (apt-get install wrk) and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18090}
# shellcheck source=ops/bench/seeded_server.sh
source ops/bench/seeded_server.sh

run() {
  local name=$1 path=$2
  local out
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" \
        -H 'X-Branch-Id: 1' -H 'Accept: application/json' "$BASE$path")
  printf '%-34s %10s req/s   p50 %8s   p99 %8s\n' "$name" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')"
}

echo
run "list, first page"                 "/patients"
run "list, page 500"                    "/patients?page=500"
run "list, sort birth_date desc"        "/patients?sortField=birth_date&sortDirection=desc"
run "list, filters[sex]=female"         "/patients?filters%5Bsex%5D=female"
run "list, search one word (pena)"      "/patients?search=pena"
run "list, search two words"            "/patients?search=jose%20pena"
run "list, search rare (zuniga)"        "/patients?search=zuniga"
run "list, search by PIN"               "/patients?search=MAIN-054321"
run "lookup (type-ahead), name"         "/patients/search?search=ana%20rey"
run "lookup (type-ahead), phone"        "/patients/search?search=912345"
run "get one patient"                   "/patients/54321"

echo
rss_before=$(ps -o rss= -p "$SERVER")
start=$(date +%s.%N)
bytes=$(curl -s -H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' "$BASE/patients/export" | wc -c)
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
rss_after=$(ps -o rss= -p "$SERVER")
echo "export of all $COUNT patients: $bytes bytes of CSV in ${elapsed} s; server RSS ${rss_before} KiB before, ${rss_after} KiB after"
