#!/usr/bin/env bash
# A 100-row page of patients without compression and in each encoding: the bytes on the wire
# and the requests per second at 8 connections.
#
#   ops/bench/compression.sh         # 10 s per case; DURATION, CONNECTIONS, PGURL can be set
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18094}
DB=clinic_bench_gzip_$$
DB_URL="${PGURL%/*}/$DB"
BASE="http://127.0.0.1:$PORT/api/v1"
PASSWORD=bench-password-1
PAGE="$BASE/patients?perPage=100"

cargo build --release --quiet
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT

DATABASE_URL="$DB_URL" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD="$PASSWORD" \
  RATE_LIMIT_API_PER_MINUTE=100000000 RUST_LOG=warn "${CARGO_TARGET_DIR:-target}/release/clinic-server" serve >/tmp/clinic-bench-gzip.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/public/health" >/dev/null && break; sleep 0.2; done
psql "$DB_URL" -q -v schema=branch_1 -v count=10000 -f ops/bench/seed_patients.sql
TOKEN=$(curl -s -X POST "$BASE/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PASSWORD\"}" | sed 's/.*"token":"\([^"]*\)".*/\1/')
AUTH=(-H "Authorization: Bearer $TOKEN" -H 'X-Branch-Id: 1' -H 'Accept: application/json')

echo
for encoding in identity zstd br gzip; do
  bytes=$(curl -s "${AUTH[@]}" -H "Accept-Encoding: $encoding" -o /dev/null -w '%{size_download}' "$PAGE")
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "${AUTH[@]}" -H "Accept-Encoding: $encoding" "$PAGE")
  printf '%-9s %8s bytes   %9s req/s   p50 %8s   p99 %8s\n' "$encoding" "$bytes" \
    "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')"
done
