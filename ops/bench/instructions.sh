#!/usr/bin/env bash
# The server's own instructions per request, counted by valgrind's callgrind: repeatable for
# the same binary and database whatever else the machine is doing, where req/s on a shared
# 2-core machine swings by a third between runs. PostgreSQL's work is not counted (it runs in
# its own processes), nor the kernel's.
#
#   ops/bench/instructions.sh                                   # this build
#   COMPARE_WITH=/path/to/other/clinic-server ops/bench/instructions.sh
#   CASES="list get" COUNT=10000 DURATION=20 ops/bench/instructions.sh
#
# For each binary: starts it under callgrind on a database of COUNT patients, signs in, and
# for each case sends requests for WARMUP seconds (statements prepared, caches filled), zeroes
# the counters, sends requests for DURATION seconds (wrk, 1 thread, 2 connections) and dumps
# them: the total over the requests answered. Background work (the read audit's writer, the
# pool's upkeep) is counted with the requests that cause it. Needs valgrind
# (callgrind_control, callgrind_annotate), wrk and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT=${COUNT:-100000}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-5}
CASES=${CASES:-"list get lookup"}
PORT=${PORT:-18098}
NAME=instr
WORK=$(mktemp -d)
SERVER_LOG=$WORK/server.log
# Under callgrind the server starts some fifty times slower.
STARTUP_SECONDS=150
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
on_exit() { rm -rf "$WORK"; }
# Starts the binary `$1` under callgrind and signs in.
start_counted() {
  SERVE=(valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p" --dump-instr=no "$1")
  start_server
  sign_in
}

# Dumps the counters and answers the instructions counted since they were zeroed.
dump_total() {
  local before dump
  before=$(ls "$WORK" | grep -c '^callgrind.out' || true)
  callgrind_control --dump "$SERVER" >/dev/null 2>&1
  for _ in $(seq 1 50); do
    [ "$(ls "$WORK" | grep -c '^callgrind.out')" -gt "$before" ] && break
    sleep 0.2
  done
  dump=$(ls -t "$WORK"/callgrind.out.* | head -1)
  callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
  rm -f "$dump"
}
path_of() {
  case $1 in
    list) echo "/patients" ;;
    get) echo "/patients/$((COUNT / 2))" ;;
    lookup) echo "/patients/search?search=ana%20pe&limit=10" ;;
    search) echo "/patients?search=pena" ;;
    live) echo "/public/live" ;;
  esac
}

start_counted "$BIN"
psql "$DB_URL" -q -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
stop_server

for bin in "$BIN" ${COMPARE_WITH:+"$COMPARE_WITH"}; do
  start_counted "$bin"
  # What the server does with no request at all (timers, pool upkeep), per second: a share of
  # it is in every case's count.
  callgrind_control --zero "$SERVER" >/dev/null 2>&1
  sleep "$DURATION"
  idle=$(dump_total)
  printf '%-12s %-40s %9.0f instructions per second with no requests\n' idle "$bin" "$(echo "$idle / $DURATION" | bc -l)"
  for c in $CASES; do
    url="$BASE$(path_of "$c")"
    send() {
      wrk -t1 -c2 -d"$1"s -H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' \
        -H 'Accept: application/json' "$url" | awk '/requests in/ {print $1}'
    }
    send "$WARMUP" >/dev/null
    callgrind_control --zero "$SERVER" >/dev/null 2>&1
    requests=$(send "$DURATION")
    total=$(dump_total)
    printf '%-12s %-40s %7s requests  %9.0f instructions per request\n' \
      "$c" "$bin" "$requests" "$(echo "$total / $requests" | bc -l)"
  done
  stop_server
done
