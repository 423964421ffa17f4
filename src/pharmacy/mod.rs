//! Pharmacy and inventory (RESOURCES.md, section 7), in the registry, rows bound to branches:
//! items, lots, the stock ledger, purchase orders, deliveries and dispensing.
//!
//! The ledger's invariants (see `ledger`): every level change is a movement in the same
//! transaction; a level never goes below zero; lots are locked in id order; document numbers
//! are gapless per branch and year.

pub mod dispensing;
pub mod items;
pub mod ledger;
pub mod orders;

use deadpool_postgres::Transaction;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{Map, Value};

use crate::http::error::{ApiResult, FieldErrors};
use crate::permissions::{PHARMACY_READ, PHARMACY_WRITE};
use crate::resource::{Resource, Scope};

/// Pharmacy rows live in the registry, belong to a branch, and are read and written with
/// the pharmacy permissions.
const PHARMACY: Resource = Resource {
    scope: Scope::Registry,
    branch_bound: true,
    read_permission: PHARMACY_READ,
    write_permission: PHARMACY_WRITE,
    ..Resource::DEFAULTS
};

pub static RESOURCES: &[&Resource] = &[
    &items::PHARMACY_ITEMS,
    &items::STOCK_AVAILABLES,
    &items::STOCK_MOVEMENTS,
    &orders::PURCHASE_ORDERS,
    &orders::DELIVERIES,
    &dispensing::TRANSACTIONS,
];

/// The record's field, when it holds something.
fn given<'a>(record: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    record.get(field).filter(|v| !v.is_null() && v.as_str() != Some(""))
}

fn problem(errors: &mut FieldErrors, field: &str, message: impl Into<String>) {
    errors.entry(field.into()).or_default().push(message.into());
}

/// Money at two places, half away from zero.
fn cents(amount: Decimal) -> Decimal {
    amount.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

/// A branch's code, time zone and local date today.
async fn branch_today(tx: &Transaction<'_>, branch: i64) -> ApiResult<(String, String, time::Date)> {
    let row = tx
        .query_one(
            "SELECT code, timezone, (now() AT TIME ZONE timezone)::date FROM branches WHERE id = $1",
            &[&branch],
        )
        .await?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// The lines a request sent, as objects.
fn lines_of(input: &Map<String, Value>) -> Option<&Vec<Value>> {
    input.get("lines").and_then(Value::as_array)
}

/// Replaces a document's lines: `insert` takes `$1` the document and `$2` the lines as
/// jsonb; the total is the sum of the line totals.
pub(crate) async fn replace_lines(
    tx: &Transaction<'_>,
    table: &str,
    lines_table: &str,
    parent: &str,
    id: i64,
    insert: &str,
    lines: &[Value],
) -> ApiResult<()> {
    tx.execute(&format!("DELETE FROM {lines_table} WHERE {parent} = $1"), &[&id]).await?;
    tx.execute(insert, &[&id, &Value::Array(lines.to_vec())]).await?;
    tx.execute(
        &format!(
            "UPDATE {table} SET total = coalesce((SELECT sum(line_total) FROM {lines_table} WHERE {parent} = $1), 0) WHERE id = $1"
        ),
        &[&id],
    )
    .await?;
    Ok(())
}
