//! The stock ledger: every change of a lot's level is a movement written in the same
//! transaction as the level, by [`post`], and nothing else writes either.
//!
//! - Lots are locked with [`lock_lots`], always in id order, so concurrent postings that
//!   touch the same lots cannot deadlock.
//! - The level moves by a conditional update (`on_hand + q >= 0`), with the table's CHECK as
//!   the backstop: a movement that cannot be met is 409 `insufficient_stock` and the caller's
//!   transaction, rolled back, writes nothing.
//! - `quantity_after` is the lot's level after the movement, in posting order.

use crate::db::Transaction;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use time::{Date, OffsetDateTime};

use crate::http::error::{ApiError, ApiResult};
use crate::resource::field::{Calculated, calculated_qty};

/// A lot's level, which movements compute: at most what the column holds.
pub const LEVEL: Calculated = calculated_qty("on_hand", "quantity");

/// A lot, locked for this transaction.
#[derive(Debug, Clone)]
pub struct Lot {
    pub id: i64,
    pub branch_id: i64,
    pub pharmacy_item_id: i64,
    pub lot_no: String,
    pub expiry_date: Option<Date>,
    pub on_hand: Decimal,
    /// Inactive lots take no new dispensing or receipts.
    pub active: bool,
}

const LOT_COLUMNS: &str = "id, branch_id, pharmacy_item_id, lot_no, expiry_date, on_hand, active";

/// Reads the lots `ids` without locking them (to learn what else a posting touches).
pub async fn peek_lots(tx: &Transaction<'_>, ids: &[i64]) -> ApiResult<Vec<Lot>> {
    let sql = format!("SELECT {LOT_COLUMNS} FROM stock_availables WHERE id = ANY($1) ORDER BY id");
    Ok(tx.query(&sql, &[&ids]).await?.iter().map(lot_of).collect())
}

/// Locks the lots `ids`, in id order, in one statement, and answers them (in that order).
/// A lot a movement names is always found: lots in the ledger are never deleted.
pub async fn lock_lots(tx: &Transaction<'_>, ids: &[i64]) -> ApiResult<Vec<Lot>> {
    let sql = format!("SELECT {LOT_COLUMNS} FROM stock_availables WHERE id = ANY($1) ORDER BY id FOR UPDATE");
    Ok(tx.query(&sql, &[&ids]).await?.iter().map(lot_of).collect())
}

/// Locks every live lot of `items` at `branch`, in id order (dispensing picks among them).
pub async fn lock_lots_of_items(tx: &Transaction<'_>, branch: i64, items: &[i64]) -> ApiResult<Vec<Lot>> {
    let sql = format!(
        "SELECT {LOT_COLUMNS} FROM stock_availables
          WHERE branch_id = $1 AND pharmacy_item_id = ANY($2) AND deleted_at IS NULL ORDER BY id FOR UPDATE"
    );
    Ok(tx.query(&sql, &[&branch, &items]).await?.iter().map(lot_of).collect())
}

fn lot_of(row: &tokio_postgres::Row) -> Lot {
    Lot {
        id: row.get(0),
        branch_id: row.get(1),
        pharmacy_item_id: row.get(2),
        lot_no: row.get(3),
        expiry_date: row.get(4),
        on_hand: row.get(5),
        active: row.get(6),
    }
}

/// The lot of `item` named `lot_no` at `branch`, made (with `expiry`) when missing.
pub async fn find_or_make_lot(
    tx: &Transaction<'_>,
    branch: i64,
    item: i64,
    lot_no: &str,
    expiry: Option<Date>,
    user: i64,
) -> ApiResult<i64> {
    let made = tx
        .query_opt(
            "INSERT INTO stock_availables (branch_id, pharmacy_item_id, lot_no, expiry_date, created_by, updated_by)
             VALUES ($1, $2, $3, $4, $5, $5)
             ON CONFLICT (branch_id, pharmacy_item_id, lot_no) WHERE deleted_at IS NULL DO NOTHING
             RETURNING id",
            &[&branch, &item, &lot_no, &expiry, &user],
        )
        .await?;
    if let Some(row) = made {
        return Ok(row.get(0));
    }
    let row = tx
        .query_one(
            "SELECT id FROM stock_availables
              WHERE branch_id = $1 AND pharmacy_item_id = $2 AND lot_no = $3 AND deleted_at IS NULL",
            &[&branch, &item, &lot_no],
        )
        .await?;
    Ok(row.get(0))
}

/// What a movement records besides its lot and quantity.
#[derive(Debug, Default, Clone)]
pub struct Entry<'a> {
    pub kind: &'a str,
    pub reason: Option<&'a str>,
    pub reference: Option<&'a str>,
    pub occurred_at: Option<OffsetDateTime>,
    pub delivery_id: Option<i64>,
    pub transaction_id: Option<i64>,
    pub counterpart_id: Option<i64>,
}

/// A short answer: what was asked of a lot and what it had.
pub fn shortage(lot: &Lot, requested: Decimal) -> Value {
    json!({
        "pharmacy_item_id": lot.pharmacy_item_id,
        "stock_available_id": lot.id,
        "requested": format!("{:.3}", requested.abs()),
        "available": format!("{:.3}", lot.on_hand),
    })
}

pub fn insufficient(shortages: Vec<Value>) -> ApiError {
    ApiError::conflict_with(
        "insufficient_stock",
        "There is not enough stock for this.",
        [("shortages".to_owned(), Value::Array(shortages))],
    )
}

/// Moves a locked lot's level by `quantity` (409 `insufficient_stock` when it would go
/// below zero, 422 on `blame` when it would pass the largest level a lot holds);
/// `lot.on_hand` follows. The caller appends the movement in the same transaction ([`post`]
/// does both).
pub async fn move_level(
    tx: &Transaction<'_>,
    lot: &mut Lot,
    quantity: Decimal,
    user: i64,
    blame: &str,
) -> ApiResult<()> {
    if quantity > Decimal::ZERO {
        LEVEL.fit(lot.on_hand + quantity).map_err(|message| ApiError::field(blame, message))?;
    }
    let moved = tx
        .query_opt(
            "UPDATE stock_availables SET on_hand = on_hand + $2, version = version + 1, updated_at = now(), updated_by = $3
              WHERE id = $1 AND on_hand + $2 >= 0 RETURNING on_hand",
            &[&lot.id, &quantity, &user],
        )
        .await?;
    let Some(row) = moved else { return Err(insufficient(vec![shortage(lot, quantity)])) };
    lot.on_hand = row.get(0);
    Ok(())
}

/// Moves a locked lot's level by `quantity` and appends the movement; answers the
/// movement's id.
pub async fn post(
    tx: &Transaction<'_>,
    lot: &mut Lot,
    quantity: Decimal,
    entry: &Entry<'_>,
    user: i64,
    blame: &str,
) -> ApiResult<i64> {
    move_level(tx, lot, quantity, user, blame).await?;
    let row = tx
        .query_one(
            "INSERT INTO stock_movements (branch_id, stock_available_id, pharmacy_item_id, kind, quantity, quantity_after,
                                          reason, reference, occurred_at, delivery_id, transaction_id, counterpart_id,
                                          created_by, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), $10, $11, $12, $13, $13)
             RETURNING id",
            &[
                &lot.branch_id,
                &lot.id,
                &lot.pharmacy_item_id,
                &entry.kind,
                &quantity,
                &lot.on_hand,
                &entry.reason,
                &entry.reference,
                &entry.occurred_at,
                &entry.delivery_id,
                &entry.transaction_id,
                &entry.counterpart_id,
                &user,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// Lots whose level is not the sum of their movements, or whose movements' running levels
/// are not what each recorded: `(lot id, what is wrong)`. Empty when the ledger holds.
pub async fn drift(client: &impl crate::db::Queries) -> ApiResult<Vec<(i64, String)>> {
    let stmt = client
        .prepare_cached(
            "WITH running AS (
                 SELECT m.stock_available_id, m.id, m.quantity_after,
                        sum(m.quantity) OVER (PARTITION BY m.stock_available_id ORDER BY m.id) AS level
                   FROM stock_movements m)
             SELECT s.id,
                    s.on_hand::text,
                    coalesce((SELECT sum(m.quantity) FROM stock_movements m WHERE m.stock_available_id = s.id), 0)::text,
                    (SELECT count(*) FROM running r WHERE r.stock_available_id = s.id AND r.quantity_after <> r.level)
               FROM stock_availables s
              WHERE s.on_hand <> coalesce((SELECT sum(m.quantity) FROM stock_movements m WHERE m.stock_available_id = s.id), 0)
                 OR EXISTS (SELECT 1 FROM running r WHERE r.stock_available_id = s.id AND r.quantity_after <> r.level)
              ORDER BY s.id",
        )
        .await?;
    let rows = client.query(&stmt, &[]).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let (id, on_hand, sum, bad): (i64, String, String, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            (
                id,
                format!(
                    "on_hand {on_hand}, sum of movements {sum}, {bad} movement(s) with a wrong quantity_after"
                ),
            )
        })
        .collect())
}
