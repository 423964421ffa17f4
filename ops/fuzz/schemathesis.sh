#!/usr/bin/env bash
# Property-based tests of the API from its own OpenAPI document (schemathesis): every
# generated request, valid or not, must be answered without a 5xx, and answers must match
# the document. Starts its own server on a fresh database.
#
#   pip install schemathesis && ops/fuzz/schemathesis.sh        # CHECKS=all for conformance too
set -euo pipefail
cd "$(dirname "$0")/../.."

CHECKS=${CHECKS:-not_a_server_error}
EXAMPLES=${EXAMPLES:-50}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18094}
DB=clinic_fuzz_$$
BASE="http://127.0.0.1:$PORT"

cargo build --release --quiet
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT
DATABASE_URL="${PGURL%/*}/$DB" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD=fuzz-password-1 PASSWORD_HASH_COST=4 \
  RATE_LIMIT_API_PER_MINUTE=100000000 RATE_LIMIT_LOGIN_PER_MINUTE=100000000 RATE_LIMIT_AUTH_PER_MINUTE=100000000 \
  RUST_LOG=warn ./target/release/clinic-server serve >/tmp/clinic-fuzz.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/api/v1/public/health" >/dev/null && break; sleep 0.2; done
TOKEN=$(curl -s -X POST "$BASE/api/v1/auth/login" -H 'Content-Type: application/json' \
  -d '{"username":"admin","password":"fuzz-password-1"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')

# Logout would revoke the token the run uses.
st run "$BASE/docs/api/openapi.json" -u "$BASE" -H "Authorization: Bearer $TOKEN" \
  --checks "$CHECKS" -n "$EXAMPLES" --exclude-path /api/v1/auth/logout -w 2
