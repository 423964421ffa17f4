//! Pharmacy transactions (dispensing). Completing one takes stock: a line that names a lot
//! takes from it, the others first-expiry-first-out (the earliest-expiring unexpired lots,
//! split across lots; expired lots never). A line that cannot be met is 409
//! `insufficient_stock` naming every shortage, and nothing is written. A void puts back
//! exactly what was taken. A medicine the patient is allergic to is dispensed only over a
//! reason, by whoever may override (`super::allergies`).

use std::collections::BTreeMap;

use crate::db::Transaction;
use rust_decimal::Decimal;
use salvo::async_trait;
use serde_json::{Map, Value, json};

use serde::Deserialize;

use super::document::{
    PHARMACY, branch_today, cents, decimal_of, lines_of, problem, replace_lines, with_totals,
};
use super::ledger::{self, Entry, Lot};
use crate::enums::PHARMACY_TRANSACTION_STATUS;
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::SortDirection;
use crate::notify::Topic;
use crate::resource::Unit;
use crate::resource::Writer;
use crate::resource::actions::{Action, Move, Stamp, StateLock, Verb};
use crate::resource::field::{
    Field, Kind, Structure, Target, calculated_money, date, list, long_text, money, qty, registry_ref, text,
};
use crate::resource::hooks::Hooks;
use crate::resource::row::{exact, exact_or_none};
use crate::resource::{Numbering, Resource, Shape, typed};

static LINE: Structure = Structure {
    name: "PharmacyTransactionLine",
    fields: &[
        registry_ref("pharmacy_item_id", "pharmacy_items").required(),
        registry_ref("stock_available_id", "stock_availables"),
        qty("quantity").required(),
        money("unit_price"),
        money("discount"),
    ],
    rules: &[],
    calculated: &[calculated_money("line_total", "quantity")],
    per_eye: false,
};

const LINES: &str = "(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', l.id, 'pharmacy_item_id', l.pharmacy_item_id, 'stock_available_id', l.stock_available_id,
        'quantity', l.quantity::text, 'unit_price', l.unit_price::text, 'discount', l.discount::text,
        'line_total', l.line_total::text, 'allocations', l.allocations) ORDER BY l.id), '[]')
      FROM transaction_lines l WHERE l.transaction_id = t.id)";

pub static TRANSACTIONS: Resource = Resource {
    path: "transactions",
    table: "transactions",
    label: "Pharmacy transaction",
    plural: "pharmacy transactions",
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        Field::new("patient_id", Kind::Ref(Target::InBranch("patients"))),
        Field::new(
            "prescribed_medicine_id",
            Kind::Ref(Target::InBranch("patient_visit_prescribed_medicines")),
        ),
        date("transaction_date").defaulted(),
        long_text("notes"),
    ],
    write_only: &[list("lines", &Kind::Object(&LINE), 1, 100).required()],
    read_only: &[
        ("number", Shape::Text),
        ("status", Shape::Text),
        ("total", Shape::Money),
        ("completed_at", Shape::Timestamp),
        ("voided_at", Shape::Timestamp),
        ("void_reason", Shape::Text),
        ("allergy_override_reason", Shape::Text),
    ],
    computed: &[("lines", LINES, Shape::Json)],
    server_written: &["total"],
    numbering: Some(Numbering {
        field: "number",
        series: "TX",
        format: "{series}-{branch}-{year}-{n}",
        digits: 6,
        yearly: true,
        typed: false,
    }),
    calculated: &[calculated_money("total", "lines")],
    filter_only: &[Field::new("status", Kind::Enum(&PHARMACY_TRANSACTION_STATUS))],
    search: &["number"],
    sort_fields: &["transaction_date", "number", "total", "created_at"],
    default_sort: "transaction_date",
    default_direction: SortDirection::Desc,
    filters: &["branch_id", "patient_id", "status"],
    filter_aliases: &["status"],
    date_range: Some("transaction_date"),
    actions: &[
        Action {
            name: "complete",
            segment: "complete",
            verb: Verb::Post,
            permission: None,
            field: "status",
            moves: &[Move { from: &["draft"], to: "completed" }],
            stamps: &[Stamp::Now("completed_at")],
            // Required to complete over the patient's active allergy (`super::allergies`).
            input: &[text("override_reason", 500)],
            done: "Transaction completed.",
        },
        Action {
            name: "void",
            segment: "void",
            verb: Verb::Post,
            permission: None,
            field: "status",
            moves: &[Move { from: &["completed"], to: "voided" }],
            stamps: &[Stamp::Now("voided_at"), Stamp::Sent("void_reason", "void_reason")],
            input: &[text("void_reason", 500).required()],
            done: "Transaction voided.",
        },
    ],
    lock: Some(StateLock {
        field: "status",
        states: &["completed", "voided"],
        editable: &[],
        amend: None,
        conflict: "not_editable",
        delete: Some("not_editable"),
    }),
    hooks: &DispensingHooks,
    ..PHARMACY
};

/// The patient a prescription belongs to, in the branch's schema.
async fn patient_of_prescription(writer: &Writer, branch: i64, prescription: i64) -> ApiResult<Option<i64>> {
    let directory = &writer.state.directory;
    let Ok(route) = directory.route(branch).await? else { return Ok(None) };
    let conn = directory.connect(&route).await?;
    let row = conn
        .query_opt(
            "SELECT patient_id FROM patient_visit_prescribed_medicines WHERE id = $1 AND deleted_at IS NULL",
            &[&prescription],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

pub struct DispensingHooks;

/// A line as sent, checked against `LINE` before the hooks see it.
#[derive(Deserialize)]
struct SentLine {
    pharmacy_item_id: i64,
    #[serde(default)]
    stock_available_id: Option<i64>,
    #[serde(deserialize_with = "exact")]
    quantity: Decimal,
    #[serde(default, deserialize_with = "exact_or_none")]
    unit_price: Option<Decimal>,
    #[serde(default, deserialize_with = "exact_or_none")]
    discount: Option<Decimal>,
}

/// The fields of a transaction its hooks compute with.
#[derive(Deserialize)]
struct Dispensing {
    branch_id: i64,
    #[serde(default)]
    patient_id: Option<i64>,
    #[serde(default)]
    prescribed_medicine_id: Option<i64>,
    #[serde(default)]
    transaction_date: Option<String>,
}

impl DispensingHooks {
    /// Each line's item (live, active), its lot (the item's, this branch's, not expired), its
    /// price (the item's sale price by default) and its discount (at most the line's value).
    async fn resolve_lines(
        &self,
        tx: &Transaction<'_>,
        branch: i64,
        today: time::Date,
        lines: Vec<Value>,
        errors: &mut FieldErrors,
    ) -> ApiResult<Vec<Value>> {
        let sent: Vec<SentLine> = lines.iter().map(typed).collect::<ApiResult<_>>()?;
        let ids: Vec<i64> = sent.iter().map(|l| l.pharmacy_item_id).collect();
        let rows = tx
            .query(
                "SELECT id, sale_price FROM pharmacy_items WHERE id = ANY($1) AND deleted_at IS NULL AND status = 'active'",
                &[&ids],
            )
            .await?;
        let prices: BTreeMap<i64, Decimal> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut resolved = Vec::with_capacity(lines.len());
        for (i, (line, sent)) in lines.into_iter().zip(sent).enumerate() {
            let Value::Object(mut line) = line else { continue };
            let item = sent.pharmacy_item_id;
            let Some(sale_price) = prices.get(&item) else {
                problem(
                    errors,
                    &format!("lines.{i}.pharmacy_item_id"),
                    "The selected pharmacy item id is invalid.",
                );
                continue;
            };
            if let Some(lot) = sent.stock_available_id {
                let usable = tx
                    .query_opt(
                        "SELECT 1 FROM stock_availables WHERE id = $1 AND branch_id = $2 AND pharmacy_item_id = $3
                            AND deleted_at IS NULL AND active AND (expiry_date IS NULL OR expiry_date >= $4)",
                        &[&lot, &branch, &item, &today],
                    )
                    .await?;
                if usable.is_none() {
                    let message = "The lot must be this item's, at this branch, active and not expired.";
                    problem(errors, &format!("lines.{i}.stock_available_id"), message);
                }
            }
            let quantity = sent.quantity;
            if quantity <= Decimal::ZERO {
                problem(errors, &format!("lines.{i}.quantity"), "The quantity must be greater than 0.");
            }
            let price = sent.unit_price.unwrap_or(*sale_price);
            let discount = sent.discount.unwrap_or(Decimal::ZERO);
            if discount > cents(quantity * price) {
                problem(
                    errors,
                    &format!("lines.{i}.discount"),
                    "The discount may not exceed the line's value.",
                );
            }
            line.insert("unit_price".into(), Value::String(format!("{price:.2}")));
            line.insert("discount".into(), Value::String(format!("{discount:.2}")));
            resolved.push(Value::Object(line));
        }
        Ok(resolved)
    }
}

#[async_trait]
impl Hooks for DispensingHooks {
    async fn resolve(
        &self,
        unit: &Unit<'_>,
        _: Option<i64>,
        record: &Map<String, Value>,
        input: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let tx = &**unit;
        let writer = unit.writer();
        let mut errors = FieldErrors::new();
        let sent: Dispensing = typed(record)?;
        let branch = sent.branch_id;
        let today = branch_today(tx, branch).await?;
        if let Some(prescription) = sent.prescribed_medicine_id {
            let owner = patient_of_prescription(writer, branch, prescription).await?;
            match (owner, sent.patient_id) {
                (Some(owner), None) => {
                    input.insert("patient_id".into(), Value::from(owner));
                }
                (Some(owner), Some(patient)) if owner != patient => {
                    problem(&mut errors, "prescribed_medicine_id", "The prescription is not this patient's.");
                }
                _ => {}
            }
        }
        match sent.transaction_date.as_deref().and_then(crate::http::list::parse_date) {
            Some(day) if day > today => {
                problem(&mut errors, "transaction_date", "The transaction date may not be in the future.")
            }
            Some(_) => {}
            None => {
                input.insert("transaction_date".into(), Value::String(today.to_string()));
            }
        }
        if let Some(lines) = lines_of(input).cloned() {
            let resolved = self.resolve_lines(tx, branch, today, lines, &mut errors).await?;
            input.insert("lines".into(), Value::Array(resolved));
            with_totals(input, |line| {
                Ok(cents(decimal_of(line, "quantity")? * decimal_of(line, "unit_price")?)
                    - decimal_of(line, "discount")?)
            })?;
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
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
        let Some(lines) = lines_of(input) else { return Ok(Vec::new()) };
        let insert = "INSERT INTO transaction_lines (transaction_id, pharmacy_item_id, stock_available_id, quantity, unit_price,
                                                     discount, line_total)
                      SELECT $1, l.pharmacy_item_id, l.stock_available_id, l.quantity, l.unit_price, l.discount, l.line_total
                        FROM jsonb_to_recordset($2) AS l(pharmacy_item_id bigint, stock_available_id bigint,
                                                         quantity numeric, unit_price numeric, discount numeric,
                                                         line_total numeric)";
        replace_lines(tx, "transaction_lines", "transaction_id", id, insert, lines).await?;
        Ok(Vec::new())
    }

    async fn acted(
        &self,
        unit: &Unit<'_>,
        id: i64,
        action: &Action,
        input: &Map<String, Value>,
        before: &Value,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        let writer = unit.writer();
        let branch = typed::<Dispensing>(before)?.branch_id;
        match action.name {
            "complete" => {
                super::allergies::check(tx, writer, id, before, input).await?;
                dispense(tx, writer, id, branch).await?
            }
            "void" => give_back(tx, writer, id).await?,
            _ => {}
        }
        Ok(Vec::new())
    }
}

/// One line of a transaction being completed.
struct Line {
    id: i64,
    item: i64,
    lot: Option<i64>,
    quantity: Decimal,
}

/// Takes every line's stock (explicit lots, then first-expiry-first-out) and writes the
/// dispense movements and allocations; any shortage is 409 naming them all.
async fn dispense(tx: &Transaction<'_>, writer: &Writer, id: i64, branch: i64) -> ApiResult<()> {
    let rows = tx
        .query(
            "SELECT id, pharmacy_item_id, stock_available_id, quantity FROM transaction_lines WHERE transaction_id = $1 ORDER BY id",
            &[&id],
        )
        .await?;
    let lines: Vec<Line> = rows
        .iter()
        .map(|r| Line { id: r.get(0), item: r.get(1), lot: r.get(2), quantity: r.get(3) })
        .collect();
    let mut items: Vec<i64> = lines.iter().map(|l| l.item).collect();
    items.sort_unstable();
    items.dedup();
    let today = branch_today(tx, branch).await?;
    let mut lots = ledger::lock_lots_of_items(tx, branch, &items).await?;
    still_dispensable(tx, &lines, &lots, today).await?;
    let plan = allocate(&lines, &mut lots.clone(), today)?;
    let entry = Entry { kind: "dispense", transaction_id: Some(id), ..Entry::default() };
    for (line, takes) in lines.iter().zip(plan) {
        let mut allocations = Vec::with_capacity(takes.len());
        for (lot_id, quantity) in takes {
            let lot = lots.iter_mut().find(|l| l.id == lot_id).ok_or(ApiError::NotFound)?;
            ledger::post(tx, lot, -quantity, &entry, writer.user_id, "lines").await?;
            allocations.push(json!({ "stock_available_id": lot_id, "quantity": format!("{quantity:.3}") }));
        }
        tx.execute(
            "UPDATE transaction_lines SET allocations = $2 WHERE id = $1",
            &[&line.id, &Value::Array(allocations)],
        )
        .await?;
    }
    Ok(())
}

/// A draft may wait days before it is completed: at completion each line's item must still be
/// active, and a lot it names still this branch's live, active lot of that item and not
/// expired (`lots` are the branch's live lots of the lines' items, locked). Else 422 naming
/// each line.
async fn still_dispensable(
    tx: &Transaction<'_>,
    lines: &[Line],
    lots: &[Lot],
    today: time::Date,
) -> ApiResult<()> {
    let items: Vec<i64> = lines.iter().map(|l| l.item).collect();
    let active: Vec<i64> = tx
        .query(
            "SELECT id FROM pharmacy_items WHERE id = ANY($1) AND deleted_at IS NULL AND status = 'active'",
            &[&items],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut errors = FieldErrors::new();
    for (i, line) in lines.iter().enumerate() {
        if !active.contains(&line.item) {
            problem(&mut errors, &format!("lines.{i}.pharmacy_item_id"), "The item is no longer active.");
        }
        let Some(named) = line.lot else { continue };
        let problem_with_lot = match lots.iter().find(|l| l.id == named && l.pharmacy_item_id == line.item) {
            None => Some("The lot is no longer this item's at this branch.".to_owned()),
            Some(lot) if !lot.active => Some("The lot has been made inactive.".to_owned()),
            Some(lot) if lot.expiry_date.is_some_and(|e| e < today) => {
                Some(format!("The lot expired on {}.", lot.expiry_date.unwrap_or(today)))
            }
            Some(_) => None,
        };
        if let Some(message) = problem_with_lot {
            problem(&mut errors, &format!("lines.{i}.stock_available_id"), message);
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// What each line takes from which lot, worked out on the locked lots before anything is
/// written; every line that cannot be met is a shortage.
fn allocate(lines: &[Line], lots: &mut [Lot], today: time::Date) -> ApiResult<Vec<Vec<(i64, Decimal)>>> {
    let mut plan = Vec::with_capacity(lines.len());
    let mut shortages = Vec::new();
    for line in lines {
        let mut wanted = line.quantity;
        let mut takes = Vec::new();
        let mut candidates: Vec<&mut Lot> = match line.lot {
            Some(lot) => lots.iter_mut().filter(|l| l.id == lot).collect(),
            None => lots
                .iter_mut()
                .filter(|l| l.pharmacy_item_id == line.item && l.on_hand > Decimal::ZERO && l.active)
                .filter(|l| l.expiry_date.is_none_or(|e| e >= today))
                .collect(),
        };
        // Earliest expiry first, lots without one last, then by id.
        candidates.sort_by_key(|l| (l.expiry_date.is_none(), l.expiry_date, l.id));
        let available: Decimal = candidates.iter().map(|l| l.on_hand).sum();
        for lot in candidates {
            if wanted.is_zero() {
                break;
            }
            let take = wanted.min(lot.on_hand);
            if take > Decimal::ZERO {
                lot.on_hand -= take;
                wanted -= take;
                takes.push((lot.id, take));
            }
        }
        if !wanted.is_zero() {
            shortages.push(json!({
                "pharmacy_item_id": line.item,
                "stock_available_id": line.lot,
                "requested": format!("{:.3}", line.quantity),
                "available": format!("{available:.3}"),
            }));
        }
        plan.push(takes);
    }
    if shortages.is_empty() { Ok(plan) } else { Err(ledger::insufficient(shortages)) }
}

/// What a completed line took from one lot.
#[derive(Deserialize)]
struct Allocation {
    stock_available_id: i64,
    #[serde(deserialize_with = "exact")]
    quantity: Decimal,
}

/// A void returns every allocation to its lot.
async fn give_back(tx: &Transaction<'_>, writer: &Writer, id: i64) -> ApiResult<()> {
    let rows = tx
        .query("SELECT allocations FROM transaction_lines WHERE transaction_id = $1 ORDER BY id", &[&id])
        .await?;
    let mut returns: Vec<(i64, Decimal)> = Vec::new();
    for row in &rows {
        let allocations: Vec<Allocation> = typed(&row.get::<_, Value>(0))?;
        returns.extend(allocations.into_iter().map(|a| (a.stock_available_id, a.quantity)));
    }
    let mut ids: Vec<i64> = returns.iter().map(|(lot, _)| *lot).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut lots = ledger::lock_lots(tx, &ids).await?;
    let entry = Entry { kind: "return", transaction_id: Some(id), ..Entry::default() };
    for (lot_id, quantity) in returns {
        let lot = lots.iter_mut().find(|l| l.id == lot_id).ok_or(ApiError::NotFound)?;
        ledger::post(tx, lot, quantity, &entry, writer.user_id, "void_reason").await?;
    }
    Ok(())
}
