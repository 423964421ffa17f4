#!/usr/bin/env bash
# Provisioning branches, then migrating all of them.
#
#   ops/bench/provision.sh           # 50 spaced, then 1,000 branches, 20 patients each before the migration
#
# Creates SPACED branches PAUSE seconds apart (each takes a spare schema), then BRANCHES
# branches one after another through POST /api/v1/branches (faster than the spares are
# made, so most build their schema) and prints the median and p99 of a create and the total. Then seeds PATIENTS patients into every branch, builds a second binary from a
# copy of the tree with one more tenant migration (a column and an index on patients), and
# times `clinic-server migrate` with it: the path an upgrade takes, refinery per branch,
# MIGRATE_PARALLELISM branches at once. The second binary is built in its own target
# directory (NEXT_TARGET), seeded once from the release build's dependencies.
set -euo pipefail
cd "$(dirname "$0")/../.."

BRANCHES=${BRANCHES:-1000}
SPACED=${SPACED:-50}
PAUSE=${PAUSE:-1}
PATIENTS=${PATIENTS:-20}
PORT=${PORT:-18093}
TARGET=${CARGO_TARGET_DIR:-target}
NEXT_TARGET=${NEXT_TARGET:-$TARGET/bench-next-migration}
WORK=$(mktemp -d)

# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh
trap 'cleanup; rm -rf "$WORK"' EXIT

# Creates $2 branches coded $1<n> one after another, $3 seconds apart, and prints the median
# and p99 of a create.
creates() {
  local prefix=$1 count=$2 pause=$3 out="$WORK/creates-$1"
  local start total failed
  start=$(date +%s.%N)
  for i in $(seq 1 "$count"); do
    curl -s -o "$WORK/reply" -w '%{http_code} %{time_total}\n' "$BASE/branches" \
      -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
      -d "{\"code\":\"$prefix$i\",\"name\":\"Branch $prefix$i\"}" >>"$out"
    [ "$pause" = 0 ] || sleep "$pause"
  done
  total=$(echo "$(date +%s.%N) - $start" | bc)
  failed=$(awk '$1 != 201' "$out" | wc -l)
  [ "$failed" = 0 ] || { echo "$failed creates failed; the last answer: $(cat "$WORK/reply")"; exit 1; }
  awk '{ printf "%.1f\n", $2 * 1000 }' "$out" >"$out.ms"
  printf 'create a branch: median %s ms, p99 %s ms, max %s ms; %s branches in %.1f s\n' \
    "$(percentile "$out.ms" 50)" "$(percentile "$out.ms" 99)" "$(percentile "$out.ms" 100)" "$count" "$total"
}

# As an administrator creates branches: one at a time, the spare schemas kept ready between
# them (SPARE_BRANCH_SCHEMAS). Then the rest in a burst, faster than spares are made.
echo "provisioning $SPACED branches through the API, $PAUSE s apart..."
creates S "$SPACED" "$PAUSE"
echo "provisioning $BRANCHES branches through the API, one after another..."
creates P "$BRANCHES" 0

echo "seeding $PATIENTS patients into each branch..."
psql "$DB_URL" -Atc "SELECT schema_name FROM branches WHERE status = 'active' ORDER BY id" |
  while read -r schema; do
    printf '\\set schema %s\n\\set count %s\n\\i %s/ops/bench/seed_patients.sql\n' "$schema" "$PATIENTS" "$PWD"
  done >"$WORK/seed.sql"
psql "$DB_URL" -q -v ON_ERROR_STOP=1 -f "$WORK/seed.sql" >/dev/null

latest=$(find tenants -name 'V*__*.sql' | sed 's|.*/V\([0-9]*\)__.*|\1|' | sort -n | tail -1)
next=$((latest + 1))
TREE="$NEXT_TARGET/tree"
echo "building a binary with tenants/V${next}__bench_column.sql in $NEXT_TARGET..."
start=$(date +%s.%N)
if [ ! -d "$NEXT_TARGET/release" ]; then
  mkdir -p "$NEXT_TARGET"
  cp -a "$TARGET/release" "$NEXT_TARGET/release"
fi
mkdir -p "$TREE"
MIGRATION="tenants/V${next}__bench_column.sql"
# Files keep their times (and the migration is rewritten only when it changes), so a second
# run rebuilds only what changed.
rsync -a --delete --exclude '/target*' --exclude '/var' --exclude '/.git' --exclude "/$MIGRATION" ./ "$TREE/"
cat >"$WORK/migration.sql" <<'SQL'
-- A column and an index on patients, as a feature would add them.
ALTER TABLE patients ADD COLUMN bench_note text;
CREATE INDEX patients_bench_note_idx ON patients (bench_note) WHERE deleted_at IS NULL;
SQL
cmp -s "$WORK/migration.sql" "$TREE/$MIGRATION" || cp "$WORK/migration.sql" "$TREE/$MIGRATION"
(cd "$TREE" && CARGO_TARGET_DIR="$(cd "$NEXT_TARGET" && pwd)" cargo build --release --quiet)
printf 'built in %.0f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"

# The upgrade: stop the server, migrate with the new binary.
kill "$SERVER" && wait "$SERVER" 2>/dev/null || true
SERVER=
echo "migrating every branch to V$next (MIGRATE_PARALLELISM ${MIGRATE_PARALLELISM:-4})..."
start=$(date +%s.%N)
DATABASE_URL="$DB_URL" RUST_LOG=warn "$NEXT_TARGET/release/clinic-server" migrate >"$WORK/migrate.out" 2>&1 ||
  { tail -5 "$WORK/migrate.out"; exit 1; }
took=$(echo "$(date +%s.%N) - $start" | bc)
psql "$DB_URL" -Atc "
  SELECT format('%s of %s branches at V%s, %s with the column', count(*) FILTER (WHERE b.schema_version = $next
           AND b.migration_state = 'current'), count(*), $next,
         (SELECT count(*) FROM information_schema.columns WHERE column_name = 'bench_note' AND table_name = 'patients'))
    FROM branches b WHERE b.status = 'active'"
active=$(psql "$DB_URL" -Atc "SELECT count(*) FROM branches WHERE status = 'active'")
printf 'migrate: %.1f s for %s branches (%.1f ms a branch)\n' "$took" "$active" "$(echo "$took * 1000 / $active" | bc -l)"
