#!/usr/bin/env bash
# The cost of serving many branches over shared connections: the same list request sent
# to one branch, then spread round-robin over BRANCHES branches (every checkout may have to
# switch the connection's search_path, and PostgreSQL re-plans cached statements).
#
#   ops/bench/branches.sh            # 1,000 branches, 20 patients each, 10 s per case
#   COMPARE_WITH=/path/to/other/clinic-server ops/bench/branches.sh   # this build against another
#   KEEP_DB=clinic_bench_branches ops/bench/branches.sh   # provisions that database once, keeps it,
#                                                         # and measures it again on later runs
#   PG_CPUS=0 CLIENT_CPUS=1 ops/bench/branches.sh   # PostgreSQL on a core of its own (lib.sh)
#
# Each case first runs for WARMUP (5 s; its figures are printed as the cold start), then is
# measured: the steady state, once PostgreSQL's backends hold the schemas they serve.
# Then a skewed mix (Zipf, s = 1.1: a few busy branches, a long tail of quiet ones), the
# ratio of each to one branch, the connections the server held and its resident memory.
set -euo pipefail
cd "$(dirname "$0")/../.."

BRANCHES=${BRANCHES:-1000}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-5s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18092}
NAME=branches
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
LUA=$(mktemp --suffix .lua)
on_exit() { rm -f "$LUA" "${ZIPF:-}"; }
# Starts the binary `$1` and signs in.
start_binary() {
  SERVE=("${CLIENT[@]}" "$1")
  start_server
  sign_in
}
start_binary "$BIN"

if [ -n "$KEPT" ]; then
  mapfile -t ids < <(psql "$DB_URL" -Atc "SELECT id FROM branches ORDER BY id")
  echo "measuring the ${#ids[@]} branches kept in $DB"
else
  echo "provisioning $BRANCHES branches..."
  start=$(date +%s.%N)
  # Four creates at a time: each is mostly PostgreSQL building the schema's indexes.
  # Each id is printed by one write, so that the four never interleave.
  mapfile -t made < <(seq 2 "$BRANCHES" | xargs -P 4 -I{} sh -c \
    "printf '%s\\n' \"\$(curl -s '$BASE/branches' -H 'Authorization: Bearer $TOKEN' -H 'Content-Type: application/json' \
       -d '{\"code\":\"B{}\",\"name\":\"Branch {}\"}' | sed 's/.*\"data\":{[^}]*\"id\":\\([0-9]*\\).*/\\1/')\"")
  bad=$(printf '%s\n' "${made[@]}" | grep -cvE '^[0-9]+$' || true)
  [ "$bad" = 0 ] || { echo "$bad creates did not answer an id"; exit 1; }
  ids=(1 "${made[@]}")
  echo "provisioned in $(echo "$(date +%s.%N) - $start" | bc) s"
  echo "seeding 20 patients into each branch..."
  for id in "${ids[@]}"; do
    echo "\\set schema branch_$id"
    echo "\\set count 20"
    echo "\\i $PWD/ops/bench/seed_patients.sql"
  done >"$LUA.seed.sql"
  psql "$DB_URL" -q -v ON_ERROR_STOP=1 -f "$LUA.seed.sql" >/dev/null
  rm -f "$LUA.seed.sql"
fi
ZIPF=$(mktemp --suffix .lua)
cat > "$ZIPF" <<LUA
local ids = { $(IFS=,; echo "${ids[*]}") }
-- Zipf, s = 1.1, over the branches in a shuffled order: cumulative weights, drawn by bisection.
local cdf, total = {}, 0
for k = 1, #ids do total = total + 1 / k ^ 1.1; cdf[k] = total end
math.randomseed(7)
for k = #ids, 2, -1 do local j = math.random(k); ids[k], ids[j] = ids[j], ids[k] end
request = function()
  local x, lo, hi = math.random() * total, 1, #ids
  while lo < hi do local mid = math.floor((lo + hi) / 2); if cdf[mid] < x then lo = mid + 1 else hi = mid end end
  wrk.headers["X-Branch-Id"] = tostring(ids[lo])
  return wrk.format("GET", "/api/v1/patients")
end
LUA

cat > "$LUA" <<LUA
local ids = { $(IFS=,; echo "${ids[*]}") }
local i = 0
request = function()
  i = i + 1
  wrk.headers["X-Branch-Id"] = tostring(ids[(i % #ids) + 1])
  return wrk.format("GET", "/api/v1/patients")
end
LUA

# What PostgreSQL keeps of a thousand branches decides much of round-robin's cost: blocks
# that miss shared_buffers are read from the kernel, and files past max_files_per_process
# are closed and opened again.
psql "$DB_URL" -Atc "SELECT 'PostgreSQL: shared_buffers ' || current_setting('shared_buffers')
  || ', max_files_per_process ' || current_setting('max_files_per_process')"
ONE=
# CPU seconds (user and system) a process has used, from /proc; 0 when it is not on this host.
cpu_seconds() {
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || { echo 0; return; }
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
# The backend of the read audit's writer (its own connection, named in pg_stat_activity).
writer_pid() {
  psql "$DB_URL" -Atc "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND application_name = 'clinic-server-read-audit' LIMIT 1"
}
measure() {
  local name=$1 duration=$2; shift 2
  local out rps writer server_before writer_before requests
  writer=$(writer_pid)
  server_before=$(cpu_seconds "$SERVER")
  writer_before=$(cpu_seconds "$writer")
  out=$("${CLIENT[@]}" wrk -t2 -c"$CONNECTIONS" -d"$duration" --latency -H "Authorization: Bearer $TOKEN" \
        -H 'Accept: application/json' "$@")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  # What a request cost the server's process and the audit writer's backend, in CPU.
  printf '%-48s %10s req/s   p50 %8s   p99 %8s   CPU per request: server %4.0f us, audit writer %4.0f us' \
    "$name" "$rps" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')" \
    "$(echo "($(cpu_seconds "$SERVER") - $server_before) * 1000000 / $requests" | bc -l)" \
    "$(echo "($(cpu_seconds "$writer") - $writer_before) * 1000000 / $requests" | bc -l)"
  RPS=$rps
}
run() {
  local name=$1; shift
  measure "$name, first $WARMUP" "$WARMUP" "$@"
  echo
  measure "$name" "$DURATION" "$@"
  [ -z "$ONE" ] && ONE=$RPS
  printf '   ratio to one branch %s\n' "$(echo "scale=2; $RPS / $ONE" | bc)"
}

cases() {
  ONE=
  echo
  run "list, one branch" -H 'X-Branch-Id: 1' "$BASE/patients"
  run "list, round-robin over $BRANCHES branches" -s "$LUA" "$BASE/patients"
  run "list, Zipf over $BRANCHES branches" -s "$ZIPF" "$BASE/patients"
}
if [ -n "${COMPARE_WITH:-}" ]; then
  # Two builds on the same database, each twice, alternately (a drift of the machine shows
  # as a difference between the two runs of one build).
  for round in 1 2; do
    for bin in "$BIN" "$COMPARE_WITH"; do
      [ -z "$SERVER" ] && start_binary "$bin"
      echo; echo "== $bin, round $round"
      cases
      stop_server
    done
  done
  exit 0
else
  cases
fi
echo
echo "server resident memory after the runs: $(awk '/VmRSS/ {print $2 / 1024 " MiB"}' /proc/$SERVER/status)"
psql "$DB_URL" -Atc "SELECT 'server connections held: ' || count(*) FROM pg_stat_activity WHERE datname = '$DB'"
# PostgreSQL on this machine: what its backends hold after meeting every schema (catalogue
# caches and cached plans grow with the schemas a backend has served).
pids=$(psql "$DB_URL" -Atc "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND pid <> pg_backend_pid()" | paste -sd, -)
if [ -n "$pids" ] && [ -r "/proc/${pids%%,*}/status" ]; then
  for pid in ${pids//,/ }; do awk '/RssAnon/ {print $2}' "/proc/$pid/status"; done |
    awk '{s += $1; if ($1 > m) m = $1} END {printf "PostgreSQL backends: %.0f MiB private memory in all, %.0f MiB the largest\n", s / 1024, m / 1024}'
fi
