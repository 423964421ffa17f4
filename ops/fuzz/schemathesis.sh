#!/usr/bin/env bash
# Property-based tests of the API from its own OpenAPI document (schemathesis): every
# generated request, valid or not, must be answered without a 5xx, and with CHECKS=all the
# answers must match the document too. Starts its own server on a fresh database, with every
# rate limit lifted (the run is one client sending thousands of requests), a session that
# the generated requests cannot end (hooks.py), and a merged patient.
#
#   pip install schemathesis && ops/fuzz/schemathesis.sh            # CHECKS=all for conformance
#   BIN=target/debug/clinic-server ops/fuzz/schemathesis.sh         # a binary already built
#   STRICT=1 ...                                  # every refusal of a valid request is a failure
set -euo pipefail
cd "$(dirname "$0")/../.."

CHECKS=${CHECKS:-not_a_server_error}
EXAMPLES=${EXAMPLES:-50}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18094}
DB=clinic_fuzz_$$
BASE="http://127.0.0.1:$PORT"
PASSWORD=fuzz-password-1

if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-target}/release/clinic-server
fi
psql "$PGURL" -qc "CREATE DATABASE $DB"
cleanup() {
  [ -n "${SERVER:-}" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  psql "$PGURL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
}
trap cleanup EXIT
lifted=100000000
DATABASE_URL="${PGURL%/*}/$DB" BIND_ADDR="127.0.0.1:$PORT" CLINIC_ADMIN_PASSWORD=$PASSWORD PASSWORD_HASH_MEMORY_KIB=8 PASSWORD_HASH_WEAK_FOR_TESTS=true \
  RATE_LIMIT_API_PER_MINUTE=$lifted RATE_LIMIT_LOGIN_PER_MINUTE=$lifted RATE_LIMIT_AUTH_PER_MINUTE=$lifted \
  RATE_LIMIT_BAD_TOKEN_PER_MINUTE=$lifted RUST_LOG=warn "$BIN" serve >/tmp/clinic-fuzz.log 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/api/v1/public/health" >/dev/null && break; sleep 0.2; done

# What the hooks protect: the run's own account, its role and its branch.
registry() { psql "${PGURL%/*}/$DB" -Atc "$1"; }
export FUZZ_BASE=$BASE FUZZ_USERNAME=admin FUZZ_PASSWORD=$PASSWORD
FUZZ_USER_ID=$(registry "SELECT id FROM users WHERE username = 'admin'")
FUZZ_ROLE_ID=$(registry "SELECT id FROM roles WHERE name = 'admin'")
FUZZ_BRANCH_ID=$(registry "SELECT id FROM branches WHERE code = 'MAIN'")
export FUZZ_USER_ID FUZZ_ROLE_ID FUZZ_BRANCH_ID

# Patient 1 merged into patient 2 before the run: the smallest id is the one generated most,
# so the routes of a patient and the bodies naming one meet a merged patient from the start
# (301 to a read, 410 to a write), not only after a merge the stateful phase happens to make;
# hooks.py keeps it from being undone.
api() {
  curl -sf -X POST "$BASE/api/v1/$1" -H 'Content-Type: application/json' -H "X-Branch-Id: $FUZZ_BRANCH_ID" \
    -H "Authorization: Bearer $TOKEN" -d "$2" >/dev/null
}
TOKEN=$(curl -sf "$BASE/api/v1/auth/login" -H 'Content-Type: application/json' \
  -d "{\"username\": \"admin\", \"password\": \"$PASSWORD\"}" | sed -E 's/.*"token":"([^"]+)".*/\1/')
for first in Ana Anna; do
  api patients "{\"first_name\": \"$first\", \"last_name\": \"Reyes\", \"birth_date\": \"1980-01-02\", \"sex\": \"female\"}"
done
api patients/2/merge '{"duplicate_id": 1, "reason": "registered twice"}'
FUZZ_MERGE_ID=$(psql "${PGURL%/*}/$DB" -Atc "SELECT id FROM branch_$FUZZ_BRANCH_ID.patient_merges WHERE duplicate_id = 1")
export FUZZ_MERGE_ID
export PYTHONPATH="$PWD/ops/fuzz${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=hooks

config=(--config-file ops/fuzz/schemathesis.toml)
[ -n "${STRICT:-}" ] && config=()
# Logout would revoke the token the run uses.
st "${config[@]}" run "$BASE/docs/api/openapi.json" --url "$BASE" \
  --checks "$CHECKS" -n "$EXAMPLES" --exclude-path /api/v1/auth/logout -w 1 "$@"
