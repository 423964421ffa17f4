//! Billing per patient: charges, discounts, payments and refunds,
//! with exact money, gapless numbers, and history that is never rewritten.
//!
//! - Open rows may change; posted rows never do (409 `transaction_posted`).
//! - Posting is serialised per patient (its row is locked): refunds never exceed payments,
//!   discounts never exceed charges (422 on `amount`).
//! - DELETE soft-deletes an open row, voids a posted one (with a reason; the row stays), and a
//!   void that would break the balances is 409 `balance_conflict`.
//! - A posted payment prints as a receipt (`receipt`).

mod receipt;

use crate::db::Transaction;
use crate::resource::row::Fields;
use rust_decimal::{Decimal, RoundingStrategy};
use salvo::async_trait;
use salvo::prelude::*;
use serde_json::{Map, Value, json};

use crate::enums::{BILLING_KIND, BILLING_STATUS};
use crate::http::error::{ApiError, ApiResult, FieldErrors};
use crate::http::list::SortDirection;
use crate::http::{self as web};
use crate::notify::Topic;
use crate::permissions::{BILLING_READ, BILLING_WRITE};
use crate::resource::actions::{Action, Move, Stamp, StateLock, Verb};
use crate::resource::decimal;
use crate::resource::field::{branch_ref, calculated_money, date, money, one_of, qty, registry_ref, text};
use crate::resource::hooks::{Deleted, Hooks};
use crate::resource::{Context, Numbering, Parent, Resource, Scope, Shape, typed};
use crate::resource::{Unit, Writer, state_conflict};

/// `open -> posted`.
const POST: Action = Action {
    name: "post",
    segment: "post",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["open"], to: "posted" }],
    stamps: &[Stamp::Now("posted_at")],
    input: &[],
    done: "Transaction posted.",
};

/// `posted -> voided`, by DELETE (the row is kept, with its reason). Declared, though not
/// routed as an action, so that a void is a move like any other.
const VOID: Action = Action {
    name: "void",
    segment: "void",
    verb: Verb::Post,
    permission: None,
    field: "status",
    moves: &[Move { from: &["posted"], to: "voided" }],
    stamps: &[Stamp::Now("voided_at"), Stamp::Sent("void_reason", "void_reason")],
    input: &[],
    done: "Transaction voided.",
};

pub static BILLING_TRANSACTIONS: Resource = Resource {
    path: "patients/{patient_id}/billing-transactions",
    table: "billing_transactions",
    label: "Billing transaction",
    plural: "billing transactions",
    scope: Scope::Branch,
    parent: Some(Parent { param: "patient_id", column: "patient_id", table: "patients", soft_deleted: true }),
    fields: &[
        one_of("kind", &BILLING_KIND).required().fixed(),
        // open (the default) or posted on create; after that only actions change it.
        one_of("status", &BILLING_STATUS).defaulted(),
        text("description", 500),
        registry_ref("bill_item_id", "bill_items"),
        registry_ref("procedure_id", "procedures"),
        registry_ref("service_id", "services"),
        qty("quantity"),
        money("unit_price"),
        money("amount"),
        registry_ref("payment_method_id", "payment_methods"),
        text("reference", 100),
        branch_ref("patient_visit_id", "patient_visits"),
        registry_ref("insurance_id", "insurances"),
        money("covered_amount"),
        date("transaction_date").defaulted(),
    ],
    read_only: &[
        ("number", Shape::Text),
        ("posted_at", Shape::Timestamp),
        ("voided_at", Shape::Timestamp),
        ("void_reason", Shape::Text),
    ],
    numbering: Some(Numbering {
        field: "number",
        series: "BT",
        format: "{branch}-{series}-{year}-{n}",
        digits: 6,
        yearly: true,
        typed: false,
    }),
    calculated: &[calculated_money("amount", "quantity"), calculated_money("covered_amount", "insurance_id")],
    search: &["number"],
    sort_fields: &["transaction_date", "number", "amount", "created_at"],
    default_sort: "transaction_date",
    default_direction: SortDirection::Desc,
    filters: &["kind", "status", "patient_visit_id"],
    filter_aliases: &["status"],
    date_range: Some("transaction_date"),
    actions: &[POST],
    lock: Some(StateLock {
        field: "status",
        states: &["posted", "voided"],
        editable: &[],
        amend: None,
        conflict: "transaction_posted",
        delete: None,
    }),
    read_permission: BILLING_READ,
    write_permission: BILLING_WRITE,
    hooks: &BillingHooks,
    printable: Some(&receipt::RECEIPT),
    ..Resource::DEFAULTS
};

/// Fields only a charge carries.
const CHARGE_ONLY: [&str; 7] = [
    "bill_item_id",
    "procedure_id",
    "service_id",
    "quantity",
    "unit_price",
    "insurance_id",
    "covered_amount",
];

fn to_cents(amount: Decimal) -> Decimal {
    amount.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

fn money_value(amount: Decimal) -> Value {
    Value::String(format!("{:.2}", to_cents(amount)))
}

fn problem(errors: &mut FieldErrors, field: &str, message: impl Into<String>) {
    errors.entry(field.into()).or_default().push(message.into());
}

pub struct BillingHooks;

/// The fields of a transaction the hooks compute with (`kind` and the patient are always
/// there: the declaration requires the one, the path gives the other).
#[derive(serde::Deserialize)]
struct Billed {
    kind: String,
    patient_id: i64,
    #[serde(default)]
    patient_visit_id: Option<i64>,
    #[serde(default)]
    transaction_date: Option<String>,
}

/// What a void needs of the stored transaction.
#[derive(serde::Deserialize)]
struct Stored {
    status: String,
    patient_id: i64,
}

/// A registry row's values, one query on the registry.
async fn registry_row(writer: &Writer, sql: &str, id: i64) -> ApiResult<Option<tokio_postgres::Row>> {
    let client = writer.state.registry.get().await?;
    Ok(client.query_opt(sql, &[&id]).await?)
}

/// The unit price a charge takes from what it names, and whether a procedure may be billed.
async fn referenced_price(
    writer: &Writer,
    record: &Map<String, Value>,
) -> ApiResult<Option<(Decimal, bool)>> {
    let named = [
        ("bill_item_id", "SELECT unit_price, true FROM bill_items WHERE id = $1"),
        ("procedure_id", "SELECT price, billable FROM procedures WHERE id = $1"),
        ("service_id", "SELECT price, true FROM services WHERE id = $1"),
    ];
    for (field, sql) in named {
        if let Some(id) = record.given(field).and_then(Value::as_i64) {
            return Ok(registry_row(writer, sql, id).await?.map(|r| (r.get(0), r.get(1))));
        }
    }
    Ok(None)
}

impl BillingHooks {
    /// A charge's quantity, price, amount and insurance share.
    async fn price_charge(
        &self,
        writer: &Writer,
        record: &Map<String, Value>,
        input: &mut Map<String, Value>,
        errors: &mut FieldErrors,
    ) -> ApiResult<()> {
        let named: Vec<&str> = ["bill_item_id", "procedure_id", "service_id"]
            .into_iter()
            .filter(|f| record.given(f).is_some())
            .collect();
        if named.len() > 1 {
            problem(errors, named[1], "A charge names at most one of a bill item, a procedure or a service.");
            return Ok(());
        }
        let quantity = record.given("quantity").and_then(decimal::of).unwrap_or(Decimal::ONE);
        if record.given("quantity").is_none() {
            input.insert("quantity".into(), Value::String("1.000".into()));
        }
        if quantity <= Decimal::ZERO {
            problem(errors, "quantity", "The quantity must be greater than 0.");
        }
        let referenced = referenced_price(writer, record).await?;
        if let Some((_, false)) = referenced {
            problem(errors, "procedure_id", "The procedure is not billable.");
        }
        let price = match (record.given("unit_price").and_then(decimal::of), referenced) {
            (Some(price), _) => price,
            (None, Some((price, _))) => {
                input.insert("unit_price".into(), money_value(price));
                price
            }
            (None, None) => {
                problem(errors, "unit_price", "The unit price field is required.");
                return Ok(());
            }
        };
        let amount = to_cents(quantity * price);
        if amount <= Decimal::ZERO {
            problem(errors, "amount", "The amount must be greater than 0.");
        }
        input.insert("amount".into(), money_value(amount));
        self.cover(writer, record, amount, input, errors).await
    }

    /// The insurance's share of a charge: given (at most the amount), else the plan's
    /// coverage of the amount.
    async fn cover(
        &self,
        writer: &Writer,
        record: &Map<String, Value>,
        amount: Decimal,
        input: &mut Map<String, Value>,
        errors: &mut FieldErrors,
    ) -> ApiResult<()> {
        let Some(insurance) = record.given("insurance_id").and_then(Value::as_i64) else {
            if record.given("covered_amount").is_some() {
                problem(errors, "covered_amount", "The covered amount goes with an insurance.");
            }
            return Ok(());
        };
        match record.given("covered_amount").and_then(decimal::of) {
            Some(covered) if covered > amount => {
                problem(errors, "covered_amount", "The covered amount may not exceed the amount.");
            }
            Some(_) => {}
            None => {
                let sql = "SELECT coverage_percent FROM insurances WHERE id = $1";
                if let Some(row) = registry_row(writer, sql, insurance).await? {
                    let percent: Decimal = row.get(0);
                    input.insert(
                        "covered_amount".into(),
                        money_value(amount * percent / Decimal::ONE_HUNDRED),
                    );
                }
            }
        }
        Ok(())
    }

    /// A payment by a method that requires a reference carries one.
    async fn check_reference(
        &self,
        writer: &Writer,
        record: &Map<String, Value>,
        errors: &mut FieldErrors,
    ) -> ApiResult<()> {
        let Some(method) = record.given("payment_method_id").and_then(Value::as_i64) else { return Ok(()) };
        let sql = "SELECT requires_reference FROM payment_methods WHERE id = $1";
        let requires = registry_row(writer, sql, method).await?.is_some_and(|r| r.get::<_, bool>(0));
        if requires && record.given("reference").is_none() {
            problem(errors, "reference", "The payment method requires a reference.");
        }
        Ok(())
    }
}

/// What each kind may and must carry, apart from prices.
fn check_kind(kind: &str, record: &Map<String, Value>, errors: &mut FieldErrors) {
    if kind != "charge" {
        for field in CHARGE_ONLY.into_iter().filter(|f| record.given(f).is_some()) {
            problem(errors, field, format!("The {} is only for charges.", field.replace('_', " ")));
        }
        match record.given("amount").and_then(decimal::of) {
            None => problem(errors, "amount", "The amount field is required."),
            Some(amount) if amount <= Decimal::ZERO => {
                problem(errors, "amount", "The amount must be greater than 0.")
            }
            Some(_) => {}
        }
    }
    let paid = matches!(kind, "payment" | "refund");
    match (paid, record.given("payment_method_id").is_some()) {
        (true, false) => problem(errors, "payment_method_id", "The payment method id field is required."),
        (false, true) => {
            problem(errors, "payment_method_id", "The payment method is only for payments and refunds.")
        }
        _ => {}
    }
    if matches!(kind, "discount" | "refund") && record.given("description").is_none() {
        problem(errors, "description", "The description field is required for a discount or a refund.");
    }
}

/// Locks the patient's row (postings and voids of one patient take turns) and answers the
/// sums of their posted rows, leaving out `excluding`.
async fn posted_sums(tx: &Transaction<'_>, patient: i64, excluding: i64) -> ApiResult<[Decimal; 4]> {
    tx.execute("SELECT 1 FROM patients WHERE id = $1 FOR UPDATE", &[&patient]).await?;
    let row = tx
        .query_one(
            "SELECT coalesce(sum(amount) FILTER (WHERE kind = 'charge'), 0),
                    coalesce(sum(amount) FILTER (WHERE kind = 'discount'), 0),
                    coalesce(sum(amount) FILTER (WHERE kind = 'payment'), 0),
                    coalesce(sum(amount) FILTER (WHERE kind = 'refund'), 0)
               FROM billing_transactions
              WHERE patient_id = $1 AND status = 'posted' AND deleted_at IS NULL AND id <> $2",
            &[&patient, &excluding],
        )
        .await?;
    Ok([row.get(0), row.get(1), row.get(2), row.get(3)])
}

/// What breaks the balances, if anything: refunds over payments, discounts over charges.
fn imbalance([charges, discounts, payments, refunds]: [Decimal; 4]) -> Option<&'static str> {
    if refunds > payments {
        Some("Refunds may not exceed payments minus earlier refunds.")
    } else if discounts > charges {
        Some("Discounts may not exceed charges.")
    } else {
        None
    }
}

/// After a row became posted: the patient's balances must still hold (422 on `amount`).
async fn check_posting(tx: &Transaction<'_>, id: i64) -> ApiResult<()> {
    let patient: i64 =
        tx.query_one("SELECT patient_id FROM billing_transactions WHERE id = $1", &[&id]).await?.get(0);
    if let Some(message) = imbalance(posted_sums(tx, patient, 0).await?) {
        return Err(ApiError::field("amount", message));
    }
    Ok(())
}

#[async_trait]
impl Hooks for BillingHooks {
    async fn prepare(&self, _: &Writer, id: Option<i64>, input: &mut Map<String, Value>) -> ApiResult<()> {
        match id {
            // After create, only the post action and a void change the status.
            Some(_) => {
                input.remove("status");
            }
            None => {
                if let Some(status) = input.text("status")
                    && status == "voided"
                {
                    return Err(ApiError::field("status", "A transaction is created open or posted."));
                }
            }
        }
        Ok(())
    }

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
        let billed: Billed = typed(record)?;
        check_kind(&billed.kind, record, &mut errors);
        if billed.kind == "charge" {
            self.price_charge(writer, record, input, &mut errors).await?;
        }
        self.check_reference(writer, record, &mut errors).await?;
        let patient = billed.patient_id;
        if let Some(visit) = billed.patient_visit_id {
            let owner: Option<i64> = tx
                .query_opt("SELECT patient_id FROM patient_visits WHERE id = $1", &[&visit])
                .await?
                .map(|r| r.get(0));
            if owner != Some(patient) {
                problem(&mut errors, "patient_visit_id", "The visit is not this patient's.");
            }
        }
        let today = writer.branch_route()?.today(tx).await?;
        match billed.transaction_date.as_deref().and_then(crate::http::list::parse_date) {
            Some(date) if date > today => {
                problem(&mut errors, "transaction_date", "The transaction date may not be in the future.")
            }
            Some(_) => {}
            None => {
                input.insert("transaction_date".into(), Value::String(today.to_string()));
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(())
    }

    /// A transaction created posted is stamped and checked like one posted later.
    async fn written(
        &self,
        unit: &Unit<'_>,
        id: i64,
        input: &Map<String, Value>,
        before: Option<&Value>,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        if before.is_none() && input.text("status") == Some("posted") {
            tx.execute("UPDATE billing_transactions SET posted_at = now() WHERE id = $1", &[&id]).await?;
            check_posting(tx, id).await?;
        }
        Ok(Vec::new())
    }

    async fn acted(
        &self,
        unit: &Unit<'_>,
        id: i64,
        _: &Action,
        _: &Map<String, Value>,
        _: &Value,
    ) -> ApiResult<Vec<Topic>> {
        let tx = &**unit;
        check_posting(tx, id).await?;
        Ok(Vec::new())
    }

    /// Open: the shared soft delete. Posted: a void with a reason, kept and shown. Voided: 409.
    async fn delete(
        &self,
        unit: &Unit<'_>,
        id: i64,
        before: &Value,
        input: &Map<String, Value>,
    ) -> ApiResult<Option<Deleted>> {
        let tx = &**unit;
        let stored: Stored = typed(before)?;
        match stored.status.as_str() {
            "open" => return Ok(None),
            "posted" => {}
            other => return Err(state_conflict(&BILLING_TRANSACTIONS, "invalid_transition", Some(other))),
        }
        let reason = input.given("void_reason").and_then(Value::as_str).map_or("", str::trim);
        if reason.is_empty() || reason.chars().count() > 500 {
            return Err(ApiError::field("void_reason", "A void reason of 1 to 500 characters is required."));
        }
        if let Some(message) = imbalance(posted_sums(tx, stored.patient_id, id).await?) {
            return Err(ApiError::conflict_with(
                "balance_conflict",
                format!("Voiding this transaction would break the balance: {message}"),
                [("status".to_owned(), json!("posted"))],
            ));
        }
        let checked = Map::from_iter([("void_reason".to_owned(), Value::String(reason.to_owned()))]);
        Ok(Some(Deleted::Act(&VOID, checked)))
    }
}

/// `GET /patients/{id}/billing-summary`: sums over the patient's posted rows; the balance is
/// charges - discounts - payments + refunds; `covered` (the insurance share) is for
/// information.
#[handler]
pub async fn summary(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let ctx = Context::of(depot)?;
    ctx.require(BILLING_READ)?;
    let patient = web::path_id(req, "id")?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let client = conn.client();
    let row = client
        .query_opt(
            "SELECT round(coalesce(sum(b.amount) FILTER (WHERE b.kind = 'charge'), 0), 2)::text,
                    round(coalesce(sum(b.amount) FILTER (WHERE b.kind = 'discount'), 0), 2)::text,
                    round(coalesce(sum(b.amount) FILTER (WHERE b.kind = 'payment'), 0), 2)::text,
                    round(coalesce(sum(b.amount) FILTER (WHERE b.kind = 'refund'), 0), 2)::text,
                    round(coalesce(sum(b.covered_amount) FILTER (WHERE b.kind = 'charge'), 0), 2)::text,
                    round(coalesce(sum(CASE b.kind WHEN 'charge' THEN b.amount WHEN 'refund' THEN b.amount
                                             ELSE -b.amount END), 0), 2)::text
               FROM patients p
               LEFT JOIN billing_transactions b
                      ON b.patient_id = p.id AND b.status = 'posted' AND b.deleted_at IS NULL
              WHERE p.id = $1 AND p.deleted_at IS NULL
              GROUP BY p.id",
            &[&patient],
        )
        .await?
        .ok_or(ApiError::NotFound)?;
    let names = ["charges", "discounts", "payments", "refunds", "covered", "balance"];
    let data: Map<String, Value> =
        names.iter().enumerate().map(|(i, n)| ((*n).to_owned(), Value::String(row.get(i)))).collect();
    web::ok(res, "Billing summary retrieved.", data);
    Ok(())
}

use crate::http::endpoints::Endpoints;

pub static RESOURCES: &[&Resource] = &[&BILLING_TRANSACTIONS];

/// A patient's totals, beyond the transactions' CRUD.
pub fn endpoints() -> Vec<Endpoints> {
    use crate::http::docs::{self, Access, Doc};
    use salvo::oapi::{Object, PathItemType};
    let mut branch = Endpoints::new(Access::Branch);
    let money = || docs::string().pattern("^-?[0-9]+\\.[0-9]{2}$");
    let data = ["charges", "discounts", "payments", "refunds", "covered", "balance"]
        .into_iter()
        .fold(Object::new(), |o, n| o.property(n, money()).required(n));
    let op = branch
        .operation("patients", "A patient's totals over posted billing transactions")
        .add_parameter(docs::path_id());
    let op = Doc::not_found(Doc::answers(op, "200", "Money as fixed-scale strings", docs::envelope(data)));
    branch.add(
        PathItemType::Get,
        "patients/{id:num}/billing-summary",
        "getPatientBillingSummary",
        summary,
        op,
    );
    vec![branch]
}
