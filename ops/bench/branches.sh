#!/usr/bin/env bash
# The cost of serving many branches over shared connections: the same list request sent
# to one branch, then spread round-robin over BRANCHES branches (every checkout may have to
# switch the connection's search_path, and each backend keeps the catalogue entries and
# plans of the many schemas it serves).
#
#   ops/bench/branches.sh            # 1,000 branches, 20 patients each, 10 s per case
#   COMPARE_WITH=/path/to/other/clinic-server ops/bench/branches.sh   # this build against another
#   KEEP_DB=clinic_bench_branches ops/bench/branches.sh   # provisions that database once, keeps it,
#                                                         # and measures it again on later runs
#   PG_CPUS=0 CLIENT_CPUS=1 ops/bench/branches.sh   # PostgreSQL on a core of its own (lib.sh)
#   PROVISION_ONLY=1 ops/bench/branches.sh   # only the 999 creates, 4 at a time: total, median,
#                                            # p99 and the pace by tenths of the run
#
# Each case first runs for WARMUP (10 s; its figures are printed as the cold start). Then the
# steady state, once PostgreSQL's backends hold the schemas they serve, in ROUNDS (5) rounds
# of one branch, round-robin and a skewed mix (Zipf, s = 1.1: a few busy branches, a long tail
# of quiet ones), each DURATION (10 s): the ratio of each mix to the round's one branch, and
# the median of the rounds. Each round also sends the list's own SQL through pgbench, to one
# schema and round-robin (below; it reads PostgreSQL's log at PGLOG, so PostgreSQL runs on
# this host). Last, the connections the server held and its resident memory.
set -euo pipefail
cd "$(dirname "$0")/../.."

BRANCHES=${BRANCHES:-1000}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-10s}
ROUNDS=${ROUNDS:-5}
# pgbench takes whole seconds.
[[ $DURATION =~ ^[0-9]+s$ ]] || { echo "DURATION is whole seconds (10s), not $DURATION"; exit 1; }
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18092}
NAME=branches
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
LUA=$(mktemp --suffix .lua)
on_exit() { rm -f "$LUA" "${ZIPF:-}" "${SQL_ONE:-}" "${SQL_ROUND_ROBIN:-}"; }
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
  # From a server with nothing left to write: a run just before leaves a thousand schemas'
  # dirty pages, whose writing slowed the next run's creates threefold from its first.
  psql "$PGURL" -qc CHECKPOINT
  start=$(date +%s.%N)
  # Four creates at a time. Each prints "id seconds finished-at" in one write, so that the
  # four never interleave.
  cat > "$LUA.create.sh" <<SH
out=\$(curl -s -w ' %{time_total}' '$BASE/branches' -H 'Authorization: Bearer $TOKEN' \\
  -H 'Content-Type: application/json' -d "{\\"code\\":\\"B\$1\\",\\"name\\":\\"Branch \$1\\"}")
id=\$(printf '%s' "\$out" | sed -n 's/.*"data":{[^}]*"id":\\([0-9]*\\).*/\\1/p')
printf '%s %s %s\\n' "\${id:-none}" "\${out##* }" "\$(date +%s.%N)"
SH
  mapfile -t made < <(seq 2 "$BRANCHES" | xargs -P 4 -n 1 sh "$LUA.create.sh")
  rm -f "$LUA.create.sh"
  bad=$(printf '%s\n' "${made[@]}" | grep -cvE '^[0-9]+ [0-9.]+ [0-9.]+$' || true)
  [ "$bad" = 0 ] || { echo "$bad creates did not answer an id"; printf '%s\n' "${made[@]}" | grep -vE '^[0-9]+ [0-9.]+ [0-9.]+$' | head -3; exit 1; }
  ids=(1 $(printf '%s\n' "${made[@]}" | cut -d' ' -f1))
  total=$(echo "$(date +%s.%N) - $start" | bc)
  printf '%s\n' "${made[@]}" | cut -d' ' -f2 > "$LUA.creates"
  echo "provisioned $(( BRANCHES - 1 )) branches, 4 at a time, in $total s: a create's median $(percentile "$LUA.creates" 50) s, p99 $(percentile "$LUA.creates" 99) s"
  # How the pace changes as branches accumulate: the creates finished in each tenth of the run.
  printf '%s\n' "${made[@]}" | sort -k3 -n | awk -v n="${#made[@]}" '
    { t[NR] = $2 } NR % int(n / 10 + 0.5) == 0 || NR == n { m = 0; c = 0; for (i = last + 1; i <= NR; i++) { m += t[i]; c++ } printf "  creates %4d to %4d: mean %.3f s\n", last + 1, NR, m / c; last = NR }'
  rm -f "$LUA.creates"
  psql "$DB_URL" -Atc "SELECT 'spare schemas now: ' || count(*) FROM pg_namespace WHERE nspname LIKE 'spare_branch_%'"
  [ -n "${PROVISION_ONLY:-}" ] && exit 0
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

# The same reads through pgbench: the list's own SQL (from PostgreSQL's log, the server's
# sessions logging every statement of one request, read audit left out), prepared once per
# connection and schema as the server prepares it. One schema runs the prepared list alone;
# round-robin sends what the server sends for a request to another schema than the
# connection's last, `BEGIN; SET search_path`, the list and `COMMIT`, in one round trip. Each
# pgbench client walks its share of the schemas (1,000 over 8 clients: 125 each), as the
# server's connections each serve a share.
PGLOG=${PGLOG:-$(ls /var/log/postgresql/postgresql-*-main.log | sort -V | tail -1)}
first=${ids[0]}
stop_server
psql "$PGURL" -qc "ALTER DATABASE $DB SET log_min_duration_statement = 0"
start_binary "$BIN"
list_once() { curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $first" "$BASE/patients"; }
list_once   # prepared, so that the next request's statements are executions
sleep 0.3
offset=$(stat -c %s "$PGLOG")
list_once
sleep 0.5
# The server's start-up work on every branch runs beside it in other sessions: the list is
# the statement of the page's shape.
LIST_SQL=$(python3 ops/bench/sql_of.py --log "$PGLOG" --from "$offset" --db "$DB" --skip-audit |
  grep -F 'AS total, p.data, p.ids' | sort -u)
LIST_SQL=${LIST_SQL%;}
[ -n "$LIST_SQL" ] && [ "$(grep -c . <<<"$LIST_SQL")" = 1 ] || { echo "not one list statement in the log: $LIST_SQL"; exit 1; }
stop_server
psql "$PGURL" -qc "ALTER DATABASE $DB RESET log_min_duration_statement"
start_binary "$BIN"
SQL_ONE=$(mktemp --suffix .sql)
SQL_ROUND_ROBIN=$(mktemp --suffix .sql)
gcd() { local a=$1 b=$2 t; while [ "$b" != 0 ]; do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }
# A client's walk comes back to its first schema after this many steps.
period=$(( ${#ids[@]} / $(gcd "${#ids[@]}" "$CONNECTIONS") ))
cat > "$SQL_ONE" <<SQL
\set i :i + 1
\if :i = 1
SET search_path TO branch_$first \; PREPARE list AS $LIST_SQL;
\endif
EXECUTE list;
SQL
# The k-th branch's id (ids need not be consecutive: a create run again after a conflict
# takes a new one), set as n by pgbench through a binary search of \if commands: ten
# comparisons for 1,000 branches.
id_of_k() {
  local lo=$1 hi=$2 mid
  if [ "$lo" = "$hi" ]; then echo "\\set n ${ids[$lo]}"; return; fi
  mid=$(( (lo + hi + 1) / 2 ))
  echo "\\if :k < $mid"; id_of_k "$lo" $((mid - 1)); echo '\else'; id_of_k "$mid" "$hi"; echo '\endif'
}
cat > "$SQL_ROUND_ROBIN" <<SQL
\set i :i + 1
\set k ((:i - 1) * $CONNECTIONS + :client_id) % ${#ids[@]}
$(id_of_k 0 $(( ${#ids[@]} - 1 )))
\if :i <= $period
SET search_path TO branch_:n \; PREPARE list_:n AS $LIST_SQL;
\endif
BEGIN \; SET search_path TO branch_:n \; EXECUTE list_:n \; COMMIT;
SQL

# What PostgreSQL keeps of a thousand branches decides much of round-robin's cost: blocks
# that miss shared_buffers are read from the kernel, and files past max_files_per_process
# are closed and opened again.
psql "$DB_URL" -Atc "SELECT 'PostgreSQL: shared_buffers ' || current_setting('shared_buffers')
  || ', max_files_per_process ' || current_setting('max_files_per_process')"
# CPU seconds (user and system) a process has used, from /proc; 0 when it is not on this host.
cpu_seconds() {
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || { echo 0; return; }
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}
# The backend of the read audit's writer (its own connection, named in pg_stat_activity).
writer_pid() {
  psql "$DB_URL" -Atc "SELECT pid FROM pg_stat_activity WHERE datname = '$DB' AND application_name = 'clinic-server-read-audit' LIMIT 1"
}
# `pid CPU-seconds` of each backend that serves the server's requests (each of its
# connections to the database but the writer's).
backends_cpu() {
  local pid
  for pid in $(psql "$DB_URL" -Atc "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'
      AND backend_type = 'client backend' AND pid <> pg_backend_pid()
      AND application_name IS DISTINCT FROM 'clinic-server-read-audit'"); do
    echo "$pid $(cpu_seconds "$pid")"
  done
}
# CPU seconds those backends used between two of its listings, $1 and $2: a backend that
# came in between counts from its start, one that left in between is missing.
backends_used() {
  awk 'NR == FNR {before[$1] = $2; next} {used += $2 - before[$1]} END {print used + 0}' \
    <(echo "$1") <(echo "$2")
}
measure() {
  local name=$1 duration=$2; shift 2
  local out rps writer server_before writer_before backends_before requests
  writer=$(writer_pid)
  server_before=$(cpu_seconds "$SERVER")
  writer_before=$(cpu_seconds "$writer")
  backends_before=$(backends_cpu)
  out=$("${CLIENT[@]}" wrk -t2 -c"$CONNECTIONS" -d"$duration" --latency -H "Authorization: Bearer $TOKEN" \
        -H 'Accept: application/json' "$@")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  # What a request cost the server's process, the backends that served it and the audit
  # writer's backend, in CPU.
  printf '%-52s %8s req/s   p50 %8s   p99 %8s   CPU per request: server %4.0f us, backends %4.0f us, audit writer %4.0f us' \
    "$name" "$rps" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')" \
    "$(echo "($(cpu_seconds "$SERVER") - $server_before) * 1000000 / $requests" | bc -l)" \
    "$(echo "$(backends_used "$backends_before" "$(backends_cpu)") * 1000000 / $requests" | bc -l)" \
    "$(echo "($(cpu_seconds "$writer") - $writer_before) * 1000000 / $requests" | bc -l)"
  RPS=$rps
}
# pgbench on the script $2, for DURATION; sets TPS.
measure_sql() {
  local name=$1 out
  out=$(PGOPTIONS="-c TimeZone=UTC -c random_page_cost=1.1" "${CLIENT[@]}" pgbench -n -M simple \
        -c "$CONNECTIONS" -j 2 -T "${DURATION%s}" -D i=0 -f "$2" "$DB_URL" 2>&1) \
    || { echo "pgbench failed on $name: $out"; exit 1; }
  TPS=$(echo "$out" | awk '/^tps/ {print $3}')
  printf '%-52s %8.0f tps' "$name" "$TPS"
}
# The median of the numbers given.
median() {
  printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

ONE_BRANCH=(-H "X-Branch-Id: $first" "$BASE/patients")
ROUND_ROBIN=(-s "$LUA" "$BASE/patients")
SKEWED=(-s "$ZIPF" "$BASE/patients")
cases() {
  local round rr=() zipf=() sql=() ratio one one_sql
  echo
  # The cold start: backends meeting the schemas for the first time.
  measure "list, one branch, first $WARMUP" "$WARMUP" "${ONE_BRANCH[@]}"; echo
  measure "list, round-robin over $BRANCHES branches, first $WARMUP" "$WARMUP" "${ROUND_ROBIN[@]}"; echo
  measure "list, Zipf over $BRANCHES branches, first $WARMUP" "$WARMUP" "${SKEWED[@]}"; echo
  # The steady state, in rounds: each mix is set against the one-branch run just before it,
  # so that the machine's drift (a third between runs of the same build on a shared host)
  # shows between rounds instead of in a ratio.
  for round in $(seq 1 "$ROUNDS"); do
    measure "list, one branch, round $round" "$DURATION" "${ONE_BRANCH[@]}"; echo
    one=$RPS
    measure "list, round-robin over $BRANCHES branches, round $round" "$DURATION" "${ROUND_ROBIN[@]}"
    ratio=$(echo "scale=2; $RPS / $one" | bc); rr+=("$ratio"); printf '   ratio to one branch %s\n' "$ratio"
    measure "list, Zipf over $BRANCHES branches, round $round" "$DURATION" "${SKEWED[@]}"
    ratio=$(echo "scale=2; $RPS / $one" | bc); zipf+=("$ratio"); printf '   ratio to one branch %s\n' "$ratio"
    measure_sql "the list's SQL, one schema, round $round" "$SQL_ONE"; echo
    one_sql=$TPS
    measure_sql "the list's SQL, round-robin, round $round" "$SQL_ROUND_ROBIN"
    ratio=$(echo "scale=2; $TPS / $one_sql" | bc); sql+=("$ratio"); printf '   ratio to one schema %s\n' "$ratio"
  done
  echo "against one branch, the median of $ROUNDS rounds: round-robin $(median "${rr[@]}"), Zipf $(median "${zipf[@]}");"
  echo "the same SQL through pgbench, round-robin against one schema: $(median "${sql[@]}")"
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
