# Sourced by the patient benchmarks: starts a server (`server.sh`) and seeds COUNT patients
# into branch MAIN with `seed_patients.sql`. Sets what `server.sh` sets.
COUNT=${COUNT:-100000}
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh

echo "seeding $COUNT patients..."
start=$(date +%s.%N)
psql "$DB_URL" -q -v schema=branch_1 -v count="$COUNT" -f ops/bench/seed_patients.sql
echo "seeded in $(echo "$(date +%s.%N) - $start" | bc) s"
