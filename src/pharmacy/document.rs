//! What the pharmacy's declarations and hooks share: where its rows live and who may touch
//! them, the lines of its documents and their totals, and a branch's local date.

use crate::db::Transaction;
use crate::resource::row::Fields;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{Map, Value};

use serde::Deserialize;

use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::permissions::{PHARMACY_READ, PHARMACY_WRITE};
use crate::resource::{Resource, Scope};

/// Pharmacy rows live in the registry, belong to a branch, and are read and written with
/// the pharmacy permissions.
pub(super) const PHARMACY: Resource = Resource {
    scope: Scope::Registry,
    branch_bound: true,
    read_permission: PHARMACY_READ,
    write_permission: PHARMACY_WRITE,
    ..Resource::DEFAULTS
};

/// The fields of a pharmacy document its hooks compute with (checked against the
/// declaration before the hooks see them).
#[derive(Deserialize)]
pub(super) struct Header {
    pub branch_id: i64,
    #[serde(default)]
    pub supplier_id: Option<i64>,
    #[serde(default)]
    pub purchase_order_id: Option<i64>,
}

/// The item a document's line names.
#[derive(Deserialize)]
pub(super) struct ItemLine {
    pub pharmacy_item_id: i64,
}

pub(super) fn problem(errors: &mut FieldErrors, field: &str, message: impl Into<String>) {
    errors.entry(field.into()).or_default().push(message.into());
}

/// Money at two places, half away from zero.
pub(super) fn cents(amount: Decimal) -> Decimal {
    amount.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

/// The local date today of the branch a document belongs to, read in the document's own
/// transaction.
pub(super) async fn branch_today(tx: &Transaction<'_>, branch: i64) -> ApiResult<time::Date> {
    Ok(crate::db::directory::code_and_today(tx, branch).await?.1)
}

/// The lines a request sent, as objects.
pub(super) fn lines_of(input: &Map<String, Value>) -> Option<&Vec<Value>> {
    input.list("lines")
}

/// Replaces a document's lines: `insert` takes `$1` the document and `$2` the lines as
/// jsonb, each with the `line_total` [`with_totals`] computed.
pub(super) async fn replace_lines(
    tx: &Transaction<'_>,
    lines_table: &str,
    parent: &str,
    id: i64,
    insert: &str,
    lines: &[Value],
) -> ApiResult<()> {
    tx.execute(&format!("DELETE FROM {lines_table} WHERE {parent} = $1"), &[&id]).await?;
    tx.execute(insert, &[&id, &Value::Array(lines.to_vec())]).await?;
    Ok(())
}

/// Computes each line's `line_total` with `line_total` (to the cent) and the document's
/// `total`, their sum, into `input`; the mechanism then holds both to their declared bounds.
pub(super) fn with_totals(
    input: &mut Map<String, Value>,
    line_total: impl Fn(&Map<String, Value>) -> ApiResult<Decimal>,
) -> ApiResult<()> {
    let Some(lines) = input.get_mut("lines").and_then(Value::as_array_mut) else { return Ok(()) };
    let mut total = Decimal::ZERO;
    for line in lines.iter_mut().filter_map(Value::as_object_mut) {
        let amount = cents(line_total(line)?);
        total += amount;
        line.insert("line_total".into(), Value::String(format!("{amount:.2}")));
    }
    input.insert("total".into(), Value::String(format!("{total:.2}")));
    Ok(())
}

/// A line's decimal field, which its declaration or the hooks made sure is there.
pub(super) fn decimal_of(line: &Map<String, Value>, field: &str) -> ApiResult<Decimal> {
    line.decimal(field)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a document line has no {field} to compute with")))
}
