#!/usr/bin/env bash
# A 100-row page of patients without compression and in each encoding: the bytes on the wire
# and the requests per second at 8 connections.
#
#   ops/bench/compression.sh         # 10 s per case; DURATION, CONNECTIONS, PGURL can be set
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-8}
PORT=${PORT:-18094}
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh
PAGE="$BASE/patients?perPage=100"
psql "$DB_URL" -q -v schema=branch_1 -v count=10000 -f ops/bench/seed_patients.sql
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
