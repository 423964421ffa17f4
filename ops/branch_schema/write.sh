#!/usr/bin/env bash
# Writes sql/branch_schema.sql: every tenant migration replayed into a scratch schema of a
# scratch database, dumped by pg_dump and written as one script (write.py says how).
#
#   ops/branch_schema/write.sh        # PostgreSQL at DATABASE_URL's server, or 127.0.0.1:5432
#
# Run it after adding a tenant migration, or leave the script as it is: a new branch is built
# from it and the migrations after its version, so it only needs writing again to keep
# builds fast. `tests/api/tenancy/catalogue.rs` fails when it and the migrations disagree.
set -euo pipefail
cd "$(dirname "$0")/../.."

SERVER=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
SCRATCH_DB=branch_schema_$$
SCRATCH=branch_999999999
SCRATCH_URL="${SERVER%/*}/$SCRATCH_DB"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; psql "$SERVER" -qc "DROP DATABASE IF EXISTS $SCRATCH_DB" >/dev/null 2>&1 || true' EXIT

psql "$SERVER" -qc "CREATE DATABASE $SCRATCH_DB" >/dev/null
psql "$SCRATCH_URL" -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;
SQL

# Every migration in version order, each `-- #include` line replaced by its file, in one
# transaction: what refinery's replay makes (the catalogue test holds the two equal).
version=0
{
  echo "BEGIN; CREATE SCHEMA $SCRATCH; SET LOCAL search_path TO $SCRATCH;"
  for file in $(ls tenants/V*__*.sql | sort -t V -k 2 -n); do
    v=$(basename "$file" | sed -E 's/^V([0-9]+)__.*/\1/')
    (( v > version )) && version=$v
    while IFS= read -r line || [ -n "$line" ]; do
      if [[ $line == "-- #include "* ]]; then cat "${line#-- #include }"; else printf '%s\n' "$line"; fi
    done <"$file"
    printf '\n;\n'
  done
  echo "COMMIT;"
} >"$WORK/replay.sql"
psql "$SCRATCH_URL" -q -v ON_ERROR_STOP=1 -f "$WORK/replay.sql" >/dev/null

dump() {
  pg_dump "$SCRATCH_URL" --schema="$SCRATCH" --exclude-table="$SCRATCH.refinery_schema_history" \
    --no-owner --no-privileges "$@"
}
dump --section=pre-data >"$WORK/pre.sql"
dump --section=data --inserts >"$WORK/data.sql"
dump --section=post-data >"$WORK/post.sql"
python3 ops/branch_schema/write.py "$SCRATCH" "$version" "$WORK/pre.sql" "$WORK/data.sql" "$WORK/post.sql" \
  "$WORK/replay.sql" sql/branch_schema.sql
echo "wrote sql/branch_schema.sql (tenant migrations V1 to V$version)"
