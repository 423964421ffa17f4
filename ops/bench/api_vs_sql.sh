#!/usr/bin/env bash
# Each request against its own SQL: wrk through the API, then pgbench sending exactly the
# statements the server sent for that request, in the same run, and the ratio.
#
#   ops/bench/api_vs_sql.sh          # 100,000 patients, 8 connections, 10 s per side
#   CASES="get list" ops/bench/api_vs_sql.sh
#   PG_CPUS=0 CLIENT_CPUS=1 ops/bench/api_vs_sql.sh   # PostgreSQL on a core of its own
#   LOAD_THREADS=2 ops/bench/api_vs_sql.sh   # two threads for wrk and for pgbench (1 by default)
#   NAME_ORDER=1 CASES="lookup lookup_word" ops/bench/api_vs_sql.sh   # patient_search in name order
#
# The type-ahead cases are also measured paced, both sides at PACED_RATE requests a second
# (wrk waits between a connection's requests, pgbench -R): the latency a front desk sees at
# a steady load below the machine's limit, not the queue of a saturating benchmark.
#
# The server's SQL is read from PostgreSQL's own log: the script turns on
# log_min_duration_statement for the bench database, sends each request once, turns it off,
# and makes a pgbench script of what was executed (ops/bench/sql_of.py), with the ids that
# vary turned into pgbench variables. The read audit is on both sides (the server's batched
# INSERT, once per request on the SQL side), and reads are also measured against their
# query alone. Needs wrk, pgbench,
# psql, python3, and read access to PostgreSQL's log (PGLOG).
set -euo pipefail
cd "$(dirname "$0")/../.."

COUNT=${COUNT:-100000}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-8}
PGLOG=${PGLOG:-$(ls /var/log/postgresql/postgresql-*-main.log | sort -V | tail -1)}
PORT=${PORT:-18097}
PACED_RATE=${PACED_RATE:-500}
# Threads of each load generator (wrk -t, pgbench -j). One drives thousands of requests a
# second; a second one takes a core's share from the server and PostgreSQL on a 2-core host.
LOAD_THREADS=${LOAD_THREADS:-1}
CASES=${CASES:-"get list search lookup lookup_word create_patient create_complaint"}
NAME=sql
WORK=$(mktemp -d)
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
on_exit() { if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi; }

start_server
psql "$DB_URL" -q -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
psql "$DB_URL" -q <<'SQL'
SET search_path TO branch_1;
INSERT INTO patient_visits (patient_id, visit_date, visit_type)
SELECT id, current_date, 'new' FROM patients ORDER BY id LIMIT 1000;
ANALYZE patient_visits;
SQL
# NAME_ORDER=1 puts `patient_search` in name order after the seed, as the server does in a
# branch's quiet hours (`tenancy::search_order`): a surname's matches then lie together.
if [ -n "${NAME_ORDER:-}" ]; then
  put=$(psql "$DB_URL" -Atc "SELECT branch_1.patient_search_put_in_name_order(0, 1)")
  [ "$put" = t ] || { echo "patient_search was not put in name order"; exit 1; }
fi
# The seeded ids run on from wherever the branch's one sequence stood (audit records draw
# from it too): each seed is one statement, so its ids are consecutive from the first.
FIRST_PATIENT=$(psql "$DB_URL" -Atc "SELECT min(id) FROM branch_1.patients")
FIRST_VISIT=$(psql "$DB_URL" -Atc "SELECT min(id) FROM branch_1.patient_visits")
LAST_PATIENT=$((FIRST_PATIENT + COUNT - 1))
LAST_VISIT=$((FIRST_VISIT + 999))
sign_in
AUTH=(-H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' -H 'Accept: application/json')

# Each case: the request (method, path, body) and the values that vary.
request() {
  case $1 in
    get) echo "GET /patients/$((FIRST_PATIENT + COUNT / 2))" ;;
    list) echo "GET /patients" ;;
    search) echo "GET /patients?search=pena" ;;
    lookup) echo "GET /patients/search?search=ana%20sa&limit=10" ;;
    lookup_word) echo "GET /patients/search?search=pena&limit=10" ;;
    create_patient) echo 'POST /patients {"first_name":"Bench","last_name":"Writer","birth_date":"1990-01-01","sex":"female"}' ;;
    create_complaint) echo "POST /complaints {\"patient_visit_id\":$((FIRST_VISIT + 776)),\"complaint\":\"Blurred vision\",\"eye\":\"left\"}" ;;
  esac
}
# The values the server binds that vary or that a plan depends on, one `--var` per line for
# sql_of.py: each becomes a pgbench variable, sent as a parameter of the prepared statement
# as the server sends it (so both sides get the same custom or generic plans).
variables() {
  case $1 in
    get) printf '%s\n' --var id=$((FIRST_PATIENT + COUNT / 2)) ;;
    create_complaint) printf '%s\n' --var visit=$((FIRST_VISIT + 776)) ;;
    search) printf '%s\n' --var word=pena ;;
    lookup) printf '%s\n' --var 'words=ana sa' ;;
    lookup_word) printf '%s\n' --var words=pena ;;
  esac
}
# The pgbench definitions of those variables that are not drawn at random.
defines() {
  case $1 in
    search) printf '%s\n' -D word=pena ;;
    lookup) printf '%s\n' -D 'words=ana sa' ;;
    lookup_word) printf '%s\n' -D words=pena ;;
  esac
}
pgbench_header() {
  case $1 in
    get) echo "\\set id random($FIRST_PATIENT, $LAST_PATIENT)" ;;
    create_complaint) echo "\\set visit random($FIRST_VISIT, $LAST_VISIT)" ;;
  esac
}

# 1. The SQL of each case, from the log, with the server's sessions logging every statement.
stop_server
psql "$PGURL" -qc "ALTER DATABASE $DB SET log_min_duration_statement = 0"
# Read records written as they come (not held for their branch's batch), so that a
# request's own record is in the log beside its statements.
READ_AUDIT_HOLD_MS=0 start_server
for c in $CASES; do
  read -r method path body <<<"$(request "$c")"
  args=(-s -o /dev/null -X "$method" "${AUTH[@]}" "$BASE$path")
  [ -n "${body:-}" ] && args+=(-H 'Content-Type: application/json' -d "$body")
  curl "${args[@]}"   # warm: statements prepared, routes cached
  # A type-ahead that finds nobody measures only the index lookup: each term must fill a page.
  case $c in
    lookup | lookup_word)
      found=$(curl -s "${AUTH[@]}" "$BASE$path" | grep -o '"pin":' | wc -l)
      [ "$found" -eq 10 ] || { echo "the $c term found $found patients, not 10"; exit 1; } ;;
  esac
  sleep 0.3
  offset=$(stat -c %s "$PGLOG")
  # The statements of a refused request would be measured as the case's own.
  status=$(curl -w '%{http_code}' "${args[@]}")
  [[ $status == 2* ]] || { echo "$c answered $status, not a success: its SQL would be the refusal's"; exit 1; }
  sleep 0.5
  mapfile -t vars < <(variables "$c")
  { pgbench_header "$c"; python3 ops/bench/sql_of.py --log "$PGLOG" --from "$offset" --db "$DB" \
      "${vars[@]}"; } >"$WORK/$c.sql"
  # The search beside the statement it replaced, whose pattern was an expression of the
  # parameter (computed again for every row of a generic plan): the search SQL of before,
  # sent as the server sent it, with the word as a parameter.
  if [ "$c" = search ]; then
    # It read its matches from the full rows (before `patient_search`).
    sed -E -e "s/LIKE \(SELECT ('%' \|\| .* \|\| '%')\)/LIKE \1/" \
        -e "s/FROM patient_search t WHERE /FROM patients t WHERE t.deleted_at IS NULL AND /" \
        "$WORK/search.sql" >"$WORK/search_before.sql"
  fi
  # A read beside its query alone: the same statements without the read audit (the server
  # writes read records in batches, off the request's path; the case's own SQL above writes
  # one per request, as the batch of a quiet server would).
  if [ "$c" = list ] || [ "$c" = get ]; then
    { pgbench_header "$c"; python3 ops/bench/sql_of.py --log "$PGLOG" --from "$offset" --db "$DB" \
        "${vars[@]}" --skip-audit; } >"$WORK/${c}_sql_only.sql"
  fi
done
stop_server
psql "$PGURL" -qc "ALTER DATABASE $DB RESET log_min_duration_statement"
start_server

# 2. Both sides of each case.
wrk_lua() {
  local c=$1
  read -r method path body <<<"$(request "$c")"
  case $c in
    get) cat <<LUA ;;
request = function() return wrk.format("GET", "/api/v1/patients/" .. math.random($FIRST_PATIENT, $LAST_PATIENT)) end
LUA
    create_complaint) cat <<LUA ;;
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  return wrk.format(nil, "/api/v1/complaints", nil,
    '{"patient_visit_id":' .. math.random($FIRST_VISIT, $LAST_VISIT) .. ',"complaint":"Blurred vision","eye":"left"}')
end
LUA
    *) cat <<LUA ;;
wrk.method = "$method"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '${body:-}'
request = function() return wrk.format(nil, "/api/v1${path}") end
LUA
  esac
}

# wrk through the API with script $1 (sets rps and p99).
api_side() {
  local out
  out=$("${CLIENT[@]}" wrk -t"$LOAD_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$1" "${AUTH[@]}" "http://127.0.0.1:$PORT")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
}
# pgbench on the SQL script $WORK/$1.sql, logged under the name $2, with pgbench options
# $3... (sets tps and sp99). Paced (-R), a transaction's logged latency counts from its
# scheduled start, so the schedule lag is in it.
sql_side() {
  local script=$1 name=$2 out
  shift 2
  # The server's branch connections: the branch's schema, UTC, SSD costs.
  out=$(PGOPTIONS="-c search_path=branch_1 -c TimeZone=UTC -c random_page_cost=1.1" "${CLIENT[@]}" pgbench -n -M prepared -c "$CONNECTIONS" -j "$LOAD_THREADS" -T "$DURATION" "$@" "${defs[@]}" -f "$WORK/$script.sql" \
        --log --log-prefix="$WORK/pgbench_$name" "$DB_URL" 2>"$WORK/pgbench_$name.err") \
    || { echo "pgbench failed on $name:"; cat "$WORK/pgbench_$name.err" "$WORK/$script.sql"; exit 1; }
  tps=$(echo "$out" | awk '/^tps/ {print $3; exit}')
  sp99=$(cat "$WORK"/pgbench_"$name".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.2fms", a[int(NR*0.99)]/1000}')
  rm -f "$WORK"/pgbench_"$name".*
}

if [ -n "${PG_CPUS:-}" ]; then echo "PostgreSQL on CPUs $PG_CPUS; the server, wrk and pgbench on $CLIENT_CPUS"; fi
printf '%-18s %12s %10s %12s %10s %8s\n' case "API req/s" "API p99" "SQL tps" "SQL p99" ratio
for c in $CASES; do
  wrk_lua "$c" >"$WORK/$c.lua"
  api_side "$WORK/$c.lua"
  others=""; [ "$c" = list ] && others=list_sql_only; [ "$c" = get ] && others=get_sql_only
  [ "$c" = search ] && others=search_before
  mapfile -t defs < <(defines "$c")
  for side in "$c" $others; do
    sql_side "$side" "$side" -r
    ratio=$(echo "scale=2; $rps / $tps" | bc)
    label=$c; [ "$side" = list_sql_only ] && label="list vs page SQL"
    [ "$side" = get_sql_only ] && label="get vs SELECT"
    [ "$side" = search_before ] && label="search vs old SQL"
    printf '%-18s %12s %10s %12s %10s %8s\n' "$label" "$rps" "$p99" "$tps" "$sp99" "$ratio"
  done
  case $c in
    lookup | lookup_word)
      # Each connection waits its share of the interval between requests.
      { cat "$WORK/$c.lua"; echo "delay = function() return $((CONNECTIONS * 1000 / PACED_RATE)) end"; } >"$WORK/${c}_paced.lua"
      api_side "$WORK/${c}_paced.lua"
      sql_side "$c" "${c}_paced" -R "$PACED_RATE"
      printf '%-18s %12s %10s %12s %10s %8s\n' "$c at ${PACED_RATE}/s" "$rps" "$p99" "$tps" "$sp99" ""
      ;;
  esac
done
