//! Pharmacy items, their lots at each branch (`/stock-availables`) and the ledger of
//! movements (`/stock-movements`).

use crate::db::Transaction;
use crate::resource::row::Fields;
use rust_decimal::Decimal;
use salvo::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::document::{PHARMACY, problem};
use super::ledger::{self, Entry};
use crate::enums::{RECORD_STATUS, STOCK_MOVEMENT_KIND};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::SortDirection;
use crate::notify::Topic;
use crate::resource::Unit;
use crate::resource::Writer;
use crate::resource::actions::{StateLock, TOGGLE_STATUS};
use crate::resource::field::{
    Field, Kind, boolean, calculated_qty, code, date, integer, money, one_of, past_timestamp, qty,
    registry_ref, signed_qty, text,
};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::row::exact;
use crate::resource::{Condition, Resource, Shape, Unique, typed};

pub static PHARMACY_ITEMS: Resource = Resource {
    path: "pharmacy-items",
    table: "pharmacy_items",
    label: "Pharmacy item",
    plural: "pharmacy items",
    fields: &[
        registry_ref("medicine_id", "medicines"),
        code("code").required(),
        text("name", 200).required(),
        text("unit", 30).required(),
        money("sale_price").required(),
        money("cost_price").defaulted(),
        qty("reorder_level").defaulted(),
        boolean("has_expiry").defaulted(),
        one_of("status", &RECORD_STATUS).defaulted(),
    ],
    search: &["code", "name"],
    sort_fields: &["name", "code", "sale_price", "created_at"],
    default_sort: "name",
    filters: &["medicine_id", "has_expiry", "status"],
    unique: &[Unique {
        index: "pharmacy_items_code_key",
        field: "code",
        message: "The code has already been taken.",
    }],
    actions: &[TOGGLE_STATUS],
    branch_bound: false,
    ..PHARMACY
};

pub static STOCK_AVAILABLES: Resource = Resource {
    path: "stock-availables",
    table: "stock_availables",
    label: "Stock lot",
    plural: "stock lots",
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        registry_ref("pharmacy_item_id", "pharmacy_items").required().fixed(),
        text("lot_no", 50).required(),
        date("expiry_date"),
        // Lots in the ledger are never deleted; one no longer in use is made inactive.
        boolean("active").defaulted(),
    ],
    read_only: &[("on_hand", Shape::Quantity)],
    calculated: &[ledger::LEVEL],
    search: &["lot_no"],
    sort_fields: &["expiry_date", "lot_no", "on_hand", "created_at"],
    default_sort: "expiry_date",
    filters: &["branch_id", "pharmacy_item_id", "active", "expiring_within_days", "below_reorder"],
    conditions: &[
        Condition {
            name: "expiring_within_days",
            kind: Kind::Integer { min: 0, max: 3650 },
            // Expired lots included (decision); "today" is the branch's.
            sql: "t.expiry_date <= (SELECT (now() AT TIME ZONE b.timezone)::date FROM branches b
                                     WHERE b.id = t.branch_id) + ($?::bigint)::int",
        },
        Condition {
            name: "below_reorder",
            kind: Kind::Bool,
            // "At or below" the item's reorder level, summed over the branch's lots (decision).
            sql: "$?::bool = EXISTS (
                      SELECT 1 FROM pharmacy_items i
                       WHERE i.id = t.pharmacy_item_id AND i.reorder_level > 0
                         AND (SELECT coalesce(sum(s.on_hand), 0) FROM stock_availables s
                               WHERE s.branch_id = t.branch_id AND s.pharmacy_item_id = t.pharmacy_item_id
                                 AND s.deleted_at IS NULL) <= i.reorder_level)",
        },
    ],
    unique: &[Unique {
        index: "stock_availables_lot_key",
        field: "lot_no",
        message: "The lot number is already used for this item at this branch.",
    }],
    hooks: &LotHooks,
    ..PHARMACY
};

/// Whether an item's lots must say when they expire.
async fn has_expiry(tx: &Transaction<'_>, item: i64) -> ApiResult<bool> {
    Ok(tx
        .query_opt("SELECT has_expiry FROM pharmacy_items WHERE id = $1", &[&item])
        .await?
        .is_some_and(|r| r.get::<_, bool>(0)))
}

pub struct LotHooks;

/// What a lot's delete needs to know.
#[derive(Deserialize)]
struct LotOf {
    #[serde(deserialize_with = "exact")]
    on_hand: Decimal,
}

/// The item a lot is of.
#[derive(Deserialize)]
struct ItemOf {
    pharmacy_item_id: i64,
}

#[async_trait]
impl Hooks for LotHooks {
    /// An item that expires needs an expiry date on each lot.
    async fn resolve(
        &self,
        unit: &Unit<'_>,
        _: Option<i64>,
        record: &Map<String, Value>,
        _: &mut Map<String, Value>,
    ) -> ApiResult<()> {
        let tx = &**unit;
        let item = typed::<ItemOf>(record)?.pharmacy_item_id;
        if record.given("expiry_date").is_none() && has_expiry(tx, item).await? {
            return Err(ApiError::field("expiry_date", "The expiry date is required for this item."));
        }
        Ok(())
    }

    /// Only an empty lot that never moved goes: a lot with movements is part of the ledger
    /// (a void returns stock into it), so it is made inactive instead.
    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        before: &Value,
        _: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        let tx = &**unit;
        let on_hand = typed::<LotOf>(before)?.on_hand;
        if !on_hand.is_zero() {
            return Err(ApiError::Conflict {
                code: "stock_not_empty",
                message: "The lot still holds stock; move it out first.".into(),
            });
        }
        let moved: bool = tx
            .query_one("SELECT EXISTS (SELECT 1 FROM stock_movements WHERE stock_available_id = $1)", &[&id])
            .await?
            .get(0);
        if moved {
            return Err(ApiError::Conflict {
                code: "in_use",
                message: "The lot has movements in the stock ledger and is kept; make it inactive instead."
                    .into(),
            });
        }
        Ok(None)
    }
}

/// Kinds a client may post; the others are written by deliveries and dispensing.
const POSTABLE: [&str; 4] = ["adjustment", "expired", "damaged", "transfer_out"];

pub static STOCK_MOVEMENTS: Resource = Resource {
    path: "stock-movements",
    table: "stock_movements",
    label: "Stock movement",
    plural: "stock movements",
    fields: &[
        registry_ref("branch_id", "branches").required().fixed(),
        registry_ref("stock_available_id", "stock_availables").required().fixed(),
        one_of("kind", &STOCK_MOVEMENT_KIND).required().fixed(),
        signed_qty("quantity").required().fixed(),
        text("reason", 500),
        text("reference", 100),
        past_timestamp("occurred_at").defaulted(),
    ],
    write_only: &[integer("to_branch_id", 1, i64::MAX)],
    read_only: &[
        ("pharmacy_item_id", Shape::Integer),
        ("quantity_after", Shape::Quantity),
        ("delivery_id", Shape::Integer),
        ("transaction_id", Shape::Integer),
        ("counterpart_id", Shape::Integer),
    ],
    server_written: &["pharmacy_item_id", "quantity_after"],
    calculated: &[calculated_qty("quantity_after", "quantity")],
    filter_only: &[
        Field::new("pharmacy_item_id", Kind::Integer { min: 1, max: i64::MAX }),
        Field::new("delivery_id", Kind::Integer { min: 1, max: i64::MAX }),
        Field::new("transaction_id", Kind::Integer { min: 1, max: i64::MAX }),
        Field::new("counterpart_id", Kind::Integer { min: 1, max: i64::MAX }),
    ],
    search: &["reference"],
    sort_fields: &["occurred_at", "created_at"],
    default_sort: "occurred_at",
    default_direction: SortDirection::Desc,
    filters: &[
        "branch_id",
        "stock_available_id",
        "pharmacy_item_id",
        "kind",
        "delivery_id",
        "transaction_id",
        "counterpart_id",
    ],
    date_range: Some("occurred_at"),
    // Append-only: a correction is a new movement.
    lock: Some(StateLock {
        field: "kind",
        states: STOCK_MOVEMENT_KIND.values,
        editable: &[],
        amend: None,
        conflict: "ledger_immutable",
        delete: Some("ledger_immutable"),
    }),
    hooks: &MovementHooks,
    ..PHARMACY
};

pub struct MovementHooks;

/// A movement as posted (its required fields checked by the declaration).
#[derive(Deserialize)]
struct Posted {
    branch_id: i64,
    stock_available_id: i64,
    kind: String,
    #[serde(deserialize_with = "exact")]
    quantity: Decimal,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    to_branch_id: Option<i64>,
}

/// What a posted movement must be: a kind a client may post, with the sign of its kind, and
/// a reason.
fn check_movement(posted: &Posted, errors: &mut FieldErrors) {
    let kind = posted.kind.as_str();
    if !POSTABLE.contains(&kind) {
        problem(errors, "kind", "Only adjustment, expired, damaged and transfer_out are posted directly.");
    }
    let quantity = posted.quantity;
    let signed_right = match kind {
        "adjustment" => !quantity.is_zero(),
        _ => quantity < Decimal::ZERO,
    };
    if !signed_right {
        let message = if kind == "adjustment" {
            "An adjustment may not be zero."
        } else {
            "The quantity must be negative: it leaves stock."
        };
        problem(errors, "quantity", message);
    }
    if posted.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        problem(errors, "reason", "The reason field is required.");
    }
}

/// The input key that carries a transfer's target lot from `resolve` to `written`.
const TARGET_LOT: &str = "target_lot_id";

#[async_trait]
impl Hooks for MovementHooks {
    /// Locks every lot the movement touches (a transfer's target lot too) in one ordered
    /// statement before anything moves, moves the level, and fills in the item and the level
    /// after; a movement that cannot be met is 409.
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
        let posted: Posted = typed(record)?;
        check_movement(&posted, &mut errors);
        let (quantity, branch, lot_id) = (posted.quantity, posted.branch_id, posted.stock_available_id);
        let Some(seen) = ledger::peek_lots(tx, &[lot_id]).await?.pop().filter(|l| l.branch_id == branch)
        else {
            problem(&mut errors, "stock_available_id", "The lot is not one of this branch's.");
            return Err(ApiError::Validation(errors));
        };
        let target =
            if posted.kind == "transfer_out" { transfer_target(writer, &posted, &mut errors)? } else { None };
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        let mut touched = vec![lot_id];
        if let Some(target) = target {
            let target_lot = ledger::find_or_make_lot(
                tx,
                target,
                seen.pharmacy_item_id,
                &seen.lot_no,
                seen.expiry_date,
                writer.user_id,
            )
            .await?;
            touched.push(target_lot);
            input.insert("to_branch_id".into(), Value::from(target));
            input.insert(TARGET_LOT.into(), Value::from(target_lot));
        }
        let locked = ledger::lock_lots(tx, &touched).await?;
        let mut source = locked.into_iter().find(|l| l.id == lot_id).ok_or(ApiError::NotFound)?;
        if source.lot_no != seen.lot_no {
            // Renamed between the look and the lock: the target found is another lot's.
            return Err(ApiError::Contended);
        }
        ledger::move_level(tx, &mut source, quantity, writer.user_id, "quantity").await?;
        input.insert("pharmacy_item_id".into(), Value::from(source.pharmacy_item_id));
        input.insert("quantity_after".into(), Value::String(format!("{:.3}", source.on_hand)));
        Ok(())
    }

    /// A transfer out books its transfer in at the target lot (locked in `resolve`), the two
    /// linked.
    async fn written(
        &self,
        unit: &Unit<'_>,
        id: i64,
        input: &Map<String, Value>,
        _: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        let writer = unit.writer();
        let Some(target_lot) = input.get(TARGET_LOT).and_then(Value::as_i64) else { return Ok(Vec::new()) };
        let posted: Posted = typed(input)?;
        let quantity = posted.quantity;
        let mut target_lot = ledger::lock_lots(tx, &[target_lot]).await?.pop().ok_or(ApiError::NotFound)?;
        let entry = Entry {
            kind: "transfer_in",
            reason: posted.reason.as_deref(),
            reference: posted.reference.as_deref(),
            counterpart_id: Some(id),
            ..Entry::default()
        };
        let incoming =
            ledger::post(tx, &mut target_lot, -quantity, &entry, writer.user_id, "quantity").await?;
        tx.execute("UPDATE stock_movements SET counterpart_id = $2 WHERE id = $1", &[&id, &incoming]).await?;
        let details = json!({ "stock_available_id": target_lot.id, "quantity": format!("{:.3}", -quantity), "counterpart_id": id });
        unit.audit_event("create", &STOCK_MOVEMENTS, Some(incoming), details).await?;
        Ok(Vec::new())
    }
}

/// The branch a transfer goes to: given, another branch, and one the caller may access.
fn transfer_target(writer: &Writer, posted: &Posted, errors: &mut FieldErrors) -> ApiResult<Option<i64>> {
    let branch = posted.branch_id;
    let Some(target) = posted.to_branch_id else {
        problem(errors, "to_branch_id", "The to branch id field is required for a transfer.");
        return Ok(None);
    };
    if target == branch {
        problem(errors, "to_branch_id", "A transfer goes to another branch.");
        return Ok(None);
    }
    if !writer.branches.contains(&target) {
        return Err(ApiError::Forbidden {
            code: "branch_forbidden",
            message: "You do not have access to this branch.".into(),
        });
    }
    Ok(Some(target))
}
