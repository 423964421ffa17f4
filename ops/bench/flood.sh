#!/usr/bin/env bash
# Reads during a login flood: GET /patients/{id} at 8 connections alone, then beside a flood
# of logins (8 connections posting the right password as fast as they can, the login limit
# lifted), once with the default hashing limits (one core short of the machine, a bounded
# line) and once with as many hashes at once as there are cores. Same binary, same run.
#
#   ops/bench/flood.sh               # 10 s per case; DURATION, CONNECTIONS, PGURL can be set
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18093}
NAME=flood
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
LOGIN=$(mktemp --suffix .lua)
on_exit() { rm -f "$LOGIN"; }
# Starts the server with the login limit lifted (and any VAR=value settings) and signs in.
start_flooded() {
  start_server RATE_LIMIT_LOGIN_PER_MINUTE=100000000 "$@"
  sign_in
}

start_flooded
psql "$DB_URL" -q -v schema=branch_1 -v count=10000 -f ops/bench/seed_patients.sql
stop_server

cat > "$LOGIN" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"username":"admin","password":"$PASSWORD"}'
LUA

get() {
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" \
    -H 'X-Branch-Id: 1' -H 'Accept: application/json' "$BASE/patients/4321"
}
report() {
  local name=$1 out=$2 logins=${3:-}
  printf '%-44s %9s req/s   p50 %8s   p99 %8s   %s\n' "$name" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')" "$logins"
}
flood_case() {
  local name=$1; shift
  start_flooded "$@"
  local flood_out get_out
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency -s "$LOGIN" "$BASE/auth/login" >"$LOGIN.out" &
  local flood=$!
  sleep 1
  get_out=$(get)
  wait "$flood"
  flood_out=$(cat "$LOGIN.out")
  local total refused
  total=$(echo "$flood_out" | awk '/requests in/ {print $1}')
  refused=$(echo "$flood_out" | awk '/Non-2xx/ {print $5}')
  report "$name" "$get_out" "logins: ${total:-0} answered, ${refused:-0} refused 503 busy_hashing"
  stop_server
}

echo
start_flooded
report "GET by id, no logins" "$(get)"
stop_server
flood_case "GET by id, login flood, default limits"
flood_case "GET by id, login flood, hashes on every core" \
  PASSWORD_HASH_CONCURRENCY="$(nproc)" PASSWORD_HASH_QUEUE=100000
rm -f "$LOGIN.out"
