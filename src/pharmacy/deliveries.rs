//! Deliveries. Posting one, in one unit: finds or makes each lot, writes receipt movements,
//! raises the order's received quantities and moves its status (partially_received,
//! received) as a declared action. Receiving more than was ordered is 422; a posted delivery
//! never changes.

use crate::resource::row::Fields;
use std::collections::BTreeMap;

use crate::db::Transaction;
use rust_decimal::Decimal;
use salvo::async_trait;
use serde_json::{Map, Value};

use super::document::{
    Header, ItemLine, PHARMACY, branch_today, decimal_of, lines_of, problem, replace_lines, with_totals,
};
use super::ledger::{self, Entry};
use crate::enums::DELIVERY_STATUS;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::SortDirection;
use crate::notify::Topic;
use crate::resource::Unit;
use crate::resource::actions::{Action, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, Structure, calculated_money, date, list, long_text, money, past_timestamp, qty,
    registry_ref, text,
};
use crate::resource::hooks::Hooks;
use crate::resource::{Resource, Shape, Within, typed};

use super::orders::{PURCHASE_ORDERS, RECEIVE_ALL, RECEIVE_PART, check_items};

static DELIVERY_LINE: Structure = Structure {
    name: "DeliveryLine",
    fields: &[
        registry_ref("pharmacy_item_id", "pharmacy_items").required(),
        text("lot_no", 50).required(),
        date("expiry_date"),
        qty("quantity").required(),
        money("unit_cost"),
    ],
    rules: &[positive_quantity],
    calculated: &[calculated_money("line_total", "quantity")],
    per_eye: false,
};

fn positive_quantity(line: &mut Map<String, Value>) -> Vec<(String, String)> {
    match line.decimal("quantity") {
        Some(q) if q <= Decimal::ZERO => {
            vec![("quantity".into(), "The quantity must be greater than 0.".into())]
        }
        _ => Vec::new(),
    }
}

const DELIVERY_LINES: &str = "(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', l.id, 'pharmacy_item_id', l.pharmacy_item_id, 'lot_no', l.lot_no, 'expiry_date', l.expiry_date,
        'quantity', l.quantity::text, 'unit_cost', l.unit_cost::text, 'line_total', l.line_total::text)
        ORDER BY l.id), '[]')
      FROM delivery_lines l WHERE l.delivery_id = t.id)";

pub static DELIVERIES: Resource = Resource {
    path: "deliveries",
    table: "deliveries",
    label: "Delivery",
    plural: "deliveries",
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        registry_ref("supplier_id", "suppliers").required(),
        registry_ref("purchase_order_id", "purchase_orders"),
        text("invoice_no", 50),
        past_timestamp("received_at").defaulted(),
        long_text("notes"),
    ],
    write_only: &[list("lines", &Kind::Object(&DELIVERY_LINE), 1, 200).required()],
    read_only: &[("status", Shape::Text), ("total", Shape::Money), ("posted_at", Shape::Timestamp)],
    computed: &[("lines", DELIVERY_LINES, Shape::Json)],
    server_written: &["total"],
    calculated: &[calculated_money("total", "lines")],
    filter_only: &[Field::new("status", Kind::Enum(&DELIVERY_STATUS))],
    search: &["invoice_no"],
    sort_fields: &["received_at", "total", "created_at"],
    default_sort: "received_at",
    default_direction: SortDirection::Desc,
    filters: &["branch_id", "supplier_id", "purchase_order_id", "status"],
    date_range: Some("received_at"),
    actions: &[
        Action {
            name: "post",
            segment: "post",
            verb: Verb::Post,
            permission: None,
            field: "status",
            moves: &[Move { from: &["draft"], to: "posted" }],
            stamps: &[Stamp::Now("posted_at")],
            input: &[],
            done: "Delivery posted.",
        },
        Action {
            name: "cancel",
            segment: "cancel",
            verb: Verb::Post,
            permission: None,
            field: "status",
            moves: &[Move { from: &["draft"], to: "cancelled" }],
            stamps: &[],
            input: &[],
            done: "Delivery cancelled.",
        },
    ],
    lock: Some(StateLock {
        field: "status",
        states: &["posted", "cancelled"],
        editable: &[],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    hooks: &DeliveryHooks,
    ..PHARMACY
};

/// An order a delivery may receive against: the branch's, the supplier's, ordered or partly
/// received. Answers its lines: item -> (line id, unit cost).
async fn receivable_order(
    tx: &Transaction<'_>,
    order: i64,
    branch: i64,
    supplier: i64,
    lock: bool,
) -> ApiResult<Option<BTreeMap<i64, (i64, Decimal, Decimal)>>> {
    let sql = format!(
        "SELECT id FROM purchase_orders WHERE id = $1 AND branch_id = $2 AND supplier_id = $3
            AND status IN ('ordered', 'partially_received') AND deleted_at IS NULL{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    if tx.query_opt(&sql, &[&order, &branch, &supplier]).await?.is_none() {
        return Ok(None);
    }
    let lines = tx
        .query(
            &format!(
                "SELECT pharmacy_item_id, id, unit_cost, quantity_ordered - quantity_received
                   FROM purchase_order_lines WHERE purchase_order_id = $1 ORDER BY id{}",
                if lock { " FOR UPDATE" } else { "" }
            ),
            &[&order],
        )
        .await?;
    Ok(Some(lines.iter().map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3)))).collect()))
}

pub struct DeliveryHooks;

/// A delivery always names its supplier (required by the declaration).
fn supplier_of(header: &Header) -> ApiResult<i64> {
    header.supplier_id.ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a delivery without its supplier")))
}

#[async_trait]
impl Hooks for DeliveryHooks {
    /// Lines against the order (its items, its costs by default), expiry where the item
    /// expires (not already past).
    async fn resolve(
        &self,
        unit: &Unit<'_>,
        _: Option<i64>,
        record: &Map<String, Value>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let tx = &**unit;
        let mut errors = FieldErrors::new();
        let header: Header = typed(record)?;
        let (branch, supplier) = (header.branch_id, supplier_of(&header)?);
        let order = match header.purchase_order_id {
            Some(order) => match receivable_order(tx, order, branch, supplier, false).await? {
                Some(lines) => Some(lines),
                None => {
                    let message = "The order must be this branch's and this supplier's, and ordered or partly received.";
                    return Err(ApiError::field("purchase_order_id", message));
                }
            },
            None => None,
        };
        let Some(lines) = lines_of(input).cloned() else { return Ok(()) };
        let items = check_items(tx, &lines, &mut errors).await?;
        let today = branch_today(tx, branch).await?;
        let mut resolved = Vec::with_capacity(lines.len());
        for (i, line) in lines.into_iter().enumerate() {
            let item = typed::<ItemLine>(&line)?.pharmacy_item_id;
            let Value::Object(mut line) = line else { continue };
            let on_order = order.as_ref().map(|o| o.get(&item).copied());
            match (on_order, line.given("unit_cost").is_some()) {
                (Some(None), _) => problem(
                    &mut errors,
                    &format!("lines.{i}.pharmacy_item_id"),
                    "The item is not on the order.",
                ),
                (Some(Some((_, cost, _))), false) => {
                    line.insert("unit_cost".into(), Value::String(format!("{cost:.2}")));
                }
                (None, false) => {
                    problem(&mut errors, &format!("lines.{i}.unit_cost"), "The unit cost field is required.")
                }
                _ => {}
            }
            match line.text("expiry_date").and_then(crate::http::list::parse_date) {
                Some(expiry) if expiry < today => {
                    problem(&mut errors, &format!("lines.{i}.expiry_date"), "The lot has already expired.")
                }
                None if items.get(&item).is_some_and(|(expires, _)| *expires) => problem(
                    &mut errors,
                    &format!("lines.{i}.expiry_date"),
                    "The expiry date is required for this item.",
                ),
                _ => {}
            }
            resolved.push(Value::Object(line));
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        input.insert("lines".into(), Value::Array(resolved));
        with_totals(input, |line| Ok(decimal_of(line, "quantity")? * decimal_of(line, "unit_cost")?))?;
        Ok(())
    }

    async fn written(
        &self,
        unit: &Unit<'_>,
        id: i64,
        input: &Map<String, Value>,
        _: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        if let Some(lines) = lines_of(input) {
            let insert = "INSERT INTO delivery_lines (delivery_id, pharmacy_item_id, lot_no, expiry_date, quantity, unit_cost, line_total)
                          SELECT $1, l.pharmacy_item_id, l.lot_no, l.expiry_date, l.quantity, l.unit_cost, l.line_total
                            FROM jsonb_to_recordset($2)
                              AS l(pharmacy_item_id bigint, lot_no text, expiry_date date, quantity numeric, unit_cost numeric,
                                   line_total numeric)";
            replace_lines(tx, "delivery_lines", "delivery_id", id, insert, lines).await?;
        }
        Ok(Vec::new())
    }

    /// Posting receives every line in one transaction; anything wrong writes nothing.
    async fn acted(
        &self,
        unit: &Unit<'_>,
        id: i64,
        action: &Action,
        _: &Map<String, Value>,
        before: &Value,
    ) -> ApiResult<Vec<Topic>> {
        if action.name == "post" {
            receive(unit, id, before).await?;
        }
        Ok(Vec::new())
    }
}

/// Receives a delivery: lots found or made (a lot of another expiry is 422), receipt
/// movements, the order's received quantities and status.
async fn receive(unit: &Unit<'_>, id: i64, delivery: &Value) -> ApiResult<()> {
    let (tx, writer) = (&**unit, unit.writer());
    let header: Header = typed(delivery)?;
    let (branch, supplier) = (header.branch_id, supplier_of(&header)?);
    let mut errors = FieldErrors::new();
    // The order first (its row, then its lines), then the lots in id order: every poster
    // takes locks in this one order.
    let order_id = header.purchase_order_id;
    let order = match order_id {
        Some(order) => match receivable_order(tx, order, branch, supplier, true).await? {
            Some(lines) => Some(lines),
            None => {
                return Err(ApiError::field(
                    "purchase_order_id",
                    "The order can no longer receive deliveries.",
                ));
            }
        },
        None => None,
    };
    let lines = tx
        .query(
            "SELECT pharmacy_item_id, lot_no, expiry_date, quantity FROM delivery_lines WHERE delivery_id = $1 ORDER BY id",
            &[&id],
        )
        .await?;
    let mut lot_ids = Vec::with_capacity(lines.len());
    // What remains to receive per item, as lines of one item (several lots) take from it.
    let mut open: BTreeMap<i64, Decimal> =
        order.iter().flatten().map(|(item, (_, _, remaining))| (*item, *remaining)).collect();
    for (i, line) in lines.iter().enumerate() {
        let (item, lot_no, expiry, quantity): (i64, String, Option<time::Date>, Decimal) =
            (line.get(0), line.get(1), line.get(2), line.get(3));
        let lot = ledger::find_or_make_lot(tx, branch, item, &lot_no, expiry, writer.user_id).await?;
        let known: Option<time::Date> =
            tx.query_one("SELECT expiry_date FROM stock_availables WHERE id = $1", &[&lot]).await?.get(0);
        if known != expiry {
            problem(
                &mut errors,
                &format!("lines.{i}.expiry_date"),
                "The lot exists with another expiry date.",
            );
        }
        if order.is_some() {
            match open.get_mut(&item) {
                Some(remaining) if quantity > *remaining => problem(
                    &mut errors,
                    &format!("lines.{i}.quantity"),
                    format!("Only {remaining:.3} remain to be received on the order."),
                ),
                Some(remaining) => *remaining -= quantity,
                None => problem(
                    &mut errors,
                    &format!("lines.{i}.pharmacy_item_id"),
                    "The item is not on the order.",
                ),
            }
        }
        lot_ids.push((lot, quantity, item, i));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let mut ids: Vec<i64> = lot_ids.iter().map(|(lot, ..)| *lot).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut locked = ledger::lock_lots(tx, &ids).await?;
    for (lot, _, _, i) in &lot_ids {
        if locked.iter().any(|l| l.id == *lot && !l.active) {
            problem(&mut errors, &format!("lines.{i}.lot_no"), "The lot is inactive: it takes no receipts.");
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let entry = Entry { kind: "receipt", delivery_id: Some(id), ..Entry::default() };
    for (lot, quantity, item, i) in &lot_ids {
        let target = locked.iter_mut().find(|l| l.id == *lot).ok_or(ApiError::NotFound)?;
        ledger::post(tx, target, *quantity, &entry, writer.user_id, &format!("lines.{i}.quantity")).await?;
        if let Some(order) = order_id {
            tx.execute(
                "UPDATE purchase_order_lines SET quantity_received = quantity_received + $3
                  WHERE purchase_order_id = $1 AND pharmacy_item_id = $2",
                &[&order, item, quantity],
            )
            .await?;
        }
    }
    if let Some(order) = order_id {
        let outstanding: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM purchase_order_lines
                                 WHERE purchase_order_id = $1 AND quantity_received < quantity_ordered)",
                &[&order],
            )
            .await?
            .get(0);
        let step = if outstanding { &RECEIVE_PART } else { &RECEIVE_ALL };
        unit.act(&PURCHASE_ORDERS, Within::default(), order, step, Map::new(), None).await?;
    }
    Ok(())
}
