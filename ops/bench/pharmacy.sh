#!/usr/bin/env bash
# Dispensing from one hot item under concurrency: completions per second, and no oversell.
#
#   ops/bench/pharmacy.sh            # 16 connections (2 wrk threads)
#
# Starts its own server (release build) on a fresh database of the PostgreSQL at PGURL
# (default postgres://postgres@127.0.0.1:5432/postgres). Creates draft transactions of one
# unit each for one item for CREATE_DURATION (numbers taken under contention), gives the
# item's one lot stock for half of them, then completes every transaction once from
# CONNECTIONS concurrent clients. Afterwards it checks the ledger: exactly as many
# completions as there was stock, level 0, one dispense movement per completion, the level
# equal to the sum of the movements, and gapless transaction numbers. Needs wrk and psql.
set -euo pipefail
cd "$(dirname "$0")/../.."

CONNECTIONS=${CONNECTIONS:-16}
CREATE_DURATION=${CREATE_DURATION:-10s}
COMPLETE_DURATION=${COMPLETE_DURATION:-30s}
PORT=${PORT:-18091}
# shellcheck source=ops/bench/server.sh
source ops/bench/server.sh
api() { curl -sf -X "$1" "$BASE$2" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$3"; }
id_of() { sed 's/.*"id":\([0-9]*\).*/\1/' | head -1; }

ITEM=$(api POST /pharmacy-items '{"code":"HOT","name":"Hot item","unit":"bottle","sale_price":"5.00","has_expiry":false}' \
  | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
LOT=$(api POST /stock-availables "{\"branch_id\":1,\"pharmacy_item_id\":$ITEM,\"lot_no\":\"HOT-1\"}" \
  | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)

stats() {
  printf '%-28s %10s req/s   p50 %8s   p99 %8s\n' "$1" \
    "$(echo "$2" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$2" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$2" | awk '$1 == "99%" {print $2}')"
}

out=$(wrk -t2 -c"$CONNECTIONS" -d"$CREATE_DURATION" --latency -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -s ops/bench/create_transaction.lua "$BASE" -- 1 "$ITEM")
stats "create transaction" "$out"

read -r FIRST LAST COUNT <<<"$(psql "$DB_URL" -Atc "SELECT min(id), max(id), count(*) FROM transactions" | tr '|' ' ')"
STOCK=$((COUNT / 2))
api POST /stock-movements "{\"branch_id\":1,\"stock_available_id\":$LOT,\"kind\":\"adjustment\",\"quantity\":\"$STOCK\",\"reason\":\"Opening stock\"}" >/dev/null
echo "$COUNT draft transactions ($FIRST..$LAST), stock for $STOCK"

out=$(wrk -t2 -c"$CONNECTIONS" -d"$COMPLETE_DURATION" --latency -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -s ops/bench/complete.lua "$BASE" -- "$FIRST" "$LAST" 2)
echo "$out" | grep '^answers:'
echo "latency of a completion (200 or 409): p50 $(echo "$out" | awk '$1 == "50%" {print $2}'), p99 $(echo "$out" | awk '$1 == "99%" {print $2}')"

psql "$DB_URL" -At <<SQL
SELECT format('completed %s of %s transactions (stock %s) in %s s: %s completions/s',
              count(*), $COUNT, $STOCK, round(extract(epoch FROM max(completed_at) - min(completed_at))::numeric, 2),
              round(count(*) / nullif(extract(epoch FROM max(completed_at) - min(completed_at)), 0)::numeric))
  FROM transactions WHERE status = 'completed';
SELECT format('lot on_hand %s; %s dispense movements summing to %s; ledger sum %s; numbers gapless: %s',
              (SELECT on_hand FROM stock_availables WHERE id = $LOT),
              count(*) FILTER (WHERE kind = 'dispense'), sum(quantity) FILTER (WHERE kind = 'dispense'), sum(quantity),
              (SELECT count(DISTINCT number) = max(right(number, 6)::int) FROM transactions))
  FROM stock_movements WHERE stock_available_id = $LOT;
SELECT CASE WHEN (SELECT count(*) FROM transactions WHERE status = 'completed') = $STOCK
             AND (SELECT on_hand FROM stock_availables WHERE id = $LOT) = 0
             AND (SELECT sum(quantity) FROM stock_movements WHERE stock_available_id = $LOT) = 0
            THEN 'no oversell: every unit dispensed exactly once'
            ELSE 'LEDGER BROKEN' END;
SQL
DATABASE_URL="$DB_URL" "$TARGET/release/clinic-server" stock check 2>&1 | tail -1
