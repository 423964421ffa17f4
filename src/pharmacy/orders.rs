//! Purchase orders: lines with their totals, numbers per branch and year, and the moves of
//! their status (ordered, received in parts by deliveries, closed or cancelled).

use crate::resource::row::Fields;
use std::collections::BTreeMap;

use crate::db::Transaction;
use rust_decimal::Decimal;
use salvo::async_trait;
use serde_json::{Map, Value};

use super::document::{
    Header, ItemLine, PHARMACY, branch_today, decimal_of, lines_of, problem, replace_lines, with_totals,
};
use crate::enums::PURCHASE_ORDER_STATUS;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::SortDirection;
use crate::notify::Topic;
use crate::resource::Unit;
use crate::resource::actions::{Action, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, Rule, Structure, calculated_money, date, days_in_order, list, long_text, money, qty,
    registry_ref, text,
};
use crate::resource::hooks::Hooks;
use crate::resource::{Numbering, Resource, Shape, typed};

static ORDER_LINE: Structure = Structure {
    name: "PurchaseOrderLine",
    fields: &[
        registry_ref("pharmacy_item_id", "pharmacy_items").required(),
        qty("quantity_ordered").required(),
        money("unit_cost").required(),
    ],
    rules: &[positive_quantity_ordered],
    calculated: &[calculated_money("line_total", "quantity_ordered")],
    per_eye: false,
};

fn positive_quantity_ordered(line: &mut Map<String, Value>) -> Vec<(String, String)> {
    match line.decimal("quantity_ordered") {
        Some(q) if q <= Decimal::ZERO => {
            vec![("quantity_ordered".into(), "The quantity ordered must be greater than 0.".into())]
        }
        _ => Vec::new(),
    }
}

/// Each item once per order or delivery (so delivery lines match order lines by item).
fn each_item_once(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    let Some(lines) = record.list("lines") else { return Vec::new() };
    let mut seen = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let item = line.integer("pharmacy_item_id");
        if seen.contains(&item) {
            problems.push((format!("lines.{i}.pharmacy_item_id"), "An item appears once per order.".into()));
        }
        seen.push(item);
    }
    problems
}

/// An order is expected on or after its date.
fn expected_after_order(record: &mut Map<String, Value>) -> Vec<(String, String)> {
    days_in_order(
        record,
        "order_date",
        "expected_date",
        "The expected date may not be before the order date.",
    )
}

/// An order's lines as answered.
const ORDER_LINES: &str = "(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', l.id, 'pharmacy_item_id', l.pharmacy_item_id, 'quantity_ordered', l.quantity_ordered::text,
        'unit_cost', l.unit_cost::text, 'quantity_received', l.quantity_received::text,
        'line_total', l.line_total::text) ORDER BY l.id), '[]')
      FROM purchase_order_lines l WHERE l.purchase_order_id = t.id)";

/// A move of an order's status by an action, stamped with the time.
const fn order_action(
    name: &'static str,
    moves: &'static [Move],
    stamps: &'static [Stamp],
    done: &'static str,
) -> Action {
    Action {
        name,
        segment: name,
        verb: Verb::Post,
        permission: None,
        field: "status",
        moves,
        stamps,
        input: &[],
        done,
    }
}

pub static PURCHASE_ORDERS: Resource = Resource {
    path: "purchase-orders",
    table: "purchase_orders",
    label: "Purchase order",
    plural: "purchase orders",
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        registry_ref("supplier_id", "suppliers").required(),
        date("order_date").defaulted(),
        date("expected_date"),
        long_text("notes"),
    ],
    write_only: &[list("lines", &Kind::Object(&ORDER_LINE), 1, 200).required()],
    read_only: &[
        ("number", Shape::Text),
        ("status", Shape::Text),
        ("total", Shape::Money),
        ("ordered_at", Shape::Timestamp),
        ("closed_at", Shape::Timestamp),
        ("cancelled_at", Shape::Timestamp),
        ("cancel_reason", Shape::Text),
    ],
    computed: &[("lines", ORDER_LINES, Shape::Json)],
    server_written: &["total"],
    numbering: Some(Numbering {
        field: "number",
        series: "PO",
        format: "{series}-{branch}-{year}-{n}",
        digits: 6,
        yearly: true,
        typed: false,
    }),
    calculated: &[calculated_money("total", "lines")],
    filter_only: &[Field::new("status", Kind::Enum(&PURCHASE_ORDER_STATUS))],
    rules: &[each_item_once as Rule, expected_after_order],
    search: &["number"],
    sort_fields: &["order_date", "number", "total", "expected_date", "created_at"],
    default_sort: "order_date",
    default_direction: SortDirection::Desc,
    filters: &["branch_id", "supplier_id", "status"],
    date_range: Some("order_date"),
    actions: &[
        order_action(
            "order",
            &[Move { from: &["draft"], to: "ordered" }],
            &[Stamp::Now("ordered_at")],
            "Purchase order placed.",
        ),
        order_action(
            "close",
            &[Move { from: &["partially_received", "received"], to: "closed" }],
            &[Stamp::Now("closed_at")],
            "Purchase order closed.",
        ),
        CANCEL_ORDER,
    ],
    lock: Some(StateLock {
        field: "status",
        states: &["ordered", "partially_received", "received", "closed", "cancelled"],
        editable: &["expected_date", "notes"],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    hooks: &OrderHooks,
    ..PHARMACY
};

/// A posted delivery moves its order: declared, though not routed (a delivery's posting runs
/// them), so that the order's status changes like any other move, audited `receive`.
pub const RECEIVE_PART: Action = order_action(
    "receive",
    &[Move { from: &["ordered", "partially_received"], to: "partially_received" }],
    &[],
    "Purchase order partly received.",
);
pub const RECEIVE_ALL: Action = order_action(
    "receive",
    &[Move { from: &["ordered", "partially_received"], to: "received" }],
    &[],
    "Purchase order received.",
);

const CANCEL_ORDER: Action = Action {
    name: "cancel",
    segment: "cancel",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["draft", "ordered"], to: "cancelled" }],
    stamps: &[Stamp::Now("cancelled_at"), Stamp::Sent("reason", "cancel_reason")],
    input: &[text("reason", 500).required()],
    done: "Purchase order cancelled.",
};

/// Whether every item named by `lines` is live and active; the bad ones are named.
pub(super) async fn check_items(
    tx: &Transaction<'_>,
    lines: &[Value],
    errors: &mut FieldErrors,
) -> ApiResult<BTreeMap<i64, (bool, Decimal)>> {
    let items: Vec<i64> =
        lines.iter().map(|l| typed::<ItemLine>(l).map(|l| l.pharmacy_item_id)).collect::<ApiResult<_>>()?;
    let rows = tx
        .query(
            "SELECT id, has_expiry, sale_price FROM pharmacy_items WHERE id = ANY($1) AND deleted_at IS NULL AND status = 'active'",
            &[&items],
        )
        .await?;
    let known: BTreeMap<i64, (bool, Decimal)> =
        rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect();
    for (i, item) in items.iter().enumerate() {
        if !known.contains_key(item) {
            problem(
                errors,
                &format!("lines.{i}.pharmacy_item_id"),
                "The selected pharmacy item id is invalid.",
            );
        }
    }
    Ok(known)
}

pub struct OrderHooks;

#[async_trait]
impl Hooks for OrderHooks {
    async fn resolve(
        &self,
        unit: &Unit<'_>,
        _: Option<i64>,
        record: &Map<String, Value>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let tx = &**unit;
        let mut errors = FieldErrors::new();
        if let Some(lines) = lines_of(input) {
            check_items(tx, &lines.clone(), &mut errors).await?;
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        with_totals(
            input,
            |line| Ok(decimal_of(line, "quantity_ordered")? * decimal_of(line, "unit_cost")?),
        )?;
        if record.given("order_date").is_none() {
            let branch = typed::<Header>(record)?.branch_id;
            let today = branch_today(tx, branch).await?;
            input.insert("order_date".into(), Value::String(today.to_string()));
        }
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
            let insert = "INSERT INTO purchase_order_lines (purchase_order_id, pharmacy_item_id, quantity_ordered, unit_cost, line_total)
                          SELECT $1, l.pharmacy_item_id, l.quantity_ordered, l.unit_cost, l.line_total
                            FROM jsonb_to_recordset($2)
                              AS l(pharmacy_item_id bigint, quantity_ordered numeric, unit_cost numeric, line_total numeric)";
            replace_lines(tx, "purchase_order_lines", "purchase_order_id", id, insert, lines).await?;
        }
        Ok(Vec::new())
    }
}
