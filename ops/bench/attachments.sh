#!/usr/bin/env bash
# The server's memory while attachments stream in: UPLOADS uploads of SIZE_MIB MiB each (a
# PDF signature then random bytes) sent at once to one patient's chart, each kept in the
# branch's database in 256 KiB chunks. Prints the server's resident memory before, its peak
# (VmHWM) after, and the wall time. An upload is spooled to a temporary file as it arrives,
# so the peak should grow by far less than UPLOADS x SIZE_MIB.
#
#   ops/bench/attachments.sh    # PGURL (127.0.0.1:5432), PORT (18480), UPLOADS (10), SIZE_MIB (25),
#                               # PROFILE (release; debug to skip the release build)
set -euo pipefail

PORT=${PORT:-18480}
NAME=attachments
UPLOADS=${UPLOADS:-10}
SIZE_MIB=${SIZE_MIB:-25}
WORK=$(mktemp -d)
on_exit() { rm -rf "$WORK"; }
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
# Uploads take as long as they take here; the bench measures memory, not the time limit.
start_server BODY_READ_TIMEOUT_MS=600000
sign_in

BRANCH=$(curl -sf "$BASE/branches" -H "Authorization: Bearer $TOKEN" | sed 's/.*"id":\([0-9]*\).*/\1/' | head -1)
PATIENT=$(curl -sf -X POST "$BASE/patients" -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" \
  -H 'Content-Type: application/json' \
  -d '{"first_name":"Ana","last_name":"Cruz","birth_date":"1980-01-02","sex":"female"}' |
  sed 's/.*"id":\([0-9]*\).*/\1/')
for i in $(seq 1 "$UPLOADS"); do
  { printf '%%PDF-1.7\n'; head -c $((SIZE_MIB * 1024 * 1024 - 9)) /dev/urandom; } >"$WORK/$i.pdf"
done

kib() { awk -v f="$1" '$1 == f ":" { print $2 }' "/proc/$SERVER/status"; }
echo "before: VmRSS $(kib VmRSS) KiB, VmHWM $(kib VmHWM) KiB"
started=$(date +%s.%N)
pids=()
for i in $(seq 1 "$UPLOADS"); do
  curl -s -o "$WORK/$i.answer" -w '%{http_code}\n' -X POST "$BASE/patients/$PATIENT/attachments" \
    -H "Authorization: Bearer $TOKEN" -H "X-Branch-Id: $BRANCH" -H 'Content-Type: application/pdf' \
    -H "Content-Disposition: attachment; filename=\"scan-$i.pdf\"" --data-binary "@$WORK/$i.pdf" \
    >"$WORK/$i.status" &
  pids+=($!)
done
wait "${pids[@]}"
echo "answers: $(cat "$WORK"/*.status | sort | uniq -c | tr -s ' \n' ' ')"
ended=$(date +%s.%N)
echo "after:  VmRSS $(kib VmRSS) KiB, VmHWM $(kib VmHWM) KiB (peak)"
awk -v a="$started" -v b="$ended" -v n="$UPLOADS" -v s="$SIZE_MIB" \
  'BEGIN { printf "%d uploads of %d MiB in %.1f s\n", n, s, b - a }'
