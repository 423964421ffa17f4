# Sourced by the benchmarks that need one server: builds the release binary, starts it on a
# fresh database of the PostgreSQL at PGURL (dropped on exit) on PORT, waits until it answers
# (or stops with its log) and logs in as the administrator. Sets TARGET and what `lib.sh`
# sets, SERVER and TOKEN.
TARGET=${CARGO_TARGET_DIR:-target}
# shellcheck source=ops/bench/lib.sh
source ops/bench/lib.sh
start_server
sign_in
