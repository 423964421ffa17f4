//! Billing transactions per patient: what each kind carries, exact
//! money, posting and voiding with the balance rules, gapless numbers under concurrency,
//! Idempotency-Key replays, lists, the summary and the audit trail. Over HTTP against a
//! real server and a fresh database.

use std::str::FromStr;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, column, id_of, ids, reply,
};
use futures_util::future::join_all;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use time::OffsetDateTime;

const AUDIT: &str = "/api/v1/audit-logs";
/// What the branch audit trail calls billing transactions.
const AUDITED_AS: &str = "patients/{patient_id}/billing-transactions";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn transactions(patient: i64) -> String {
    format!("/api/v1/patients/{patient}/billing-transactions")
}

fn today() -> time::Date {
    OffsetDateTime::now_utc().date()
}

fn day(offset: i64) -> String {
    (today() + time::Duration::days(offset)).to_string()
}

fn money(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Decimal as the API writes money: two places.
fn cents(amount: Decimal) -> String {
    format!("{:.2}", amount)
}

/// The usual bodies: a charge by unit price, a discount, a cash payment, a cash refund.
fn charge(price: &str) -> Value {
    json!({ "kind": "charge", "unit_price": price, "description": "Consultation" })
}

fn discount(amount: &str) -> Value {
    json!({ "kind": "discount", "amount": amount, "description": "Senior citizen" })
}

fn payment(amount: &str) -> Value {
    json!({ "kind": "payment", "amount": amount, "payment_method_id": CASH })
}

fn refund(amount: &str) -> Value {
    json!({ "kind": "refund", "amount": amount, "payment_method_id": CASH, "description": "Overpaid" })
}

fn posted(mut body: Value) -> Value {
    body["status"] = json!("posted");
    body
}

fn with(mut body: Value, extra: Value) -> Value {
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    body
}

/// Seeded payment methods (migrations/V3): CASH needs no reference, CARD does.
const CASH: i64 = 1;
const CARD: i64 = 2;

/// A clinic with its patient's transactions path.
struct Till {
    clinic: Clinic,
    path: String,
}

impl Till {
    async fn open() -> Self {
        let clinic = Clinic::open().await;
        let path = transactions(clinic.patient);
        Self { clinic, path }
    }

    fn app(&self) -> &TestApp {
        &self.clinic.app
    }

    fn branch(&self) -> Option<i64> {
        Some(self.clinic.branch)
    }

    async fn post(&self, body: Value) -> Reply {
        self.app().post(&self.path, self.branch(), body).await
    }

    async fn created(&self, body: Value) -> Value {
        self.app().created(&self.path, self.branch(), body).await
    }

    fn member(&self, id: i64) -> String {
        format!("{}/{id}", self.path)
    }

    async fn post_action(&self, id: i64) -> Reply {
        self.app().post(&format!("{}/post", self.member(id)), self.branch(), json!({})).await
    }

    async fn void(&self, id: i64, reason: &str) -> Reply {
        let req = self.app().request(Method::DELETE, &self.member(id), self.branch());
        reply(req.json(&json!({ "void_reason": reason }))).await
    }

    async fn summary(&self) -> Value {
        let r = self
            .app()
            .get(&format!("/api/v1/patients/{}/billing-summary", self.clinic.patient), self.branch())
            .await;
        assert_status(&r, 200);
        r.body["data"].clone()
    }

    async fn count(&self) -> i64 {
        let client = self.app().state.registry.get().await.unwrap();
        let sql = format!("SELECT count(*) FROM branch_{}.billing_transactions", self.clinic.branch);
        client.query_one(&sql, &[]).await.unwrap().get(0)
    }

    async fn list(&self, query: &str) -> Reply {
        self.app().get(&format!("{}?perPage=100&{query}", self.path), self.branch()).await
    }
}

/// `MAIN-BT-<year>-<n, 6 digits>`.
fn number(n: i64) -> String {
    format!("MAIN-BT-{}-{n:06}", today().year())
}

// ---------------------------------------------------------------------------------------
// Charges and prices
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_charge_is_quantity_times_price_rounded_half_away_from_zero() {
    let till = Till::open().await;
    let r = till.post(with(charge("33.33"), json!({ "quantity": 1.5 }))).await;
    assert_status(&r, 201);
    let data = &r.body["data"];
    assert_eq!(data["amount"], "50.00", "49.995 rounds up");
    assert_eq!(data["quantity"], "1.500");
    assert_eq!(data["unit_price"], "33.33");
    assert_eq!(data["kind"], "charge");
    assert_eq!(data["status"], "open");
    assert_eq!(data["patient_id"], till.clinic.patient);
    assert_eq!(data["number"], number(1));
    assert_eq!(data["transaction_date"], today().to_string());
    assert!(data["posted_at"].is_null() && data["voided_at"].is_null(), "{data}");
    for (quantity, price, amount) in [
        (json!("0.5"), "0.01", "0.01"),
        (json!("0.333"), "1.50", "0.50"),
        (json!(3), "0.10", "0.30"),
        (json!("2"), "1250", "2500.00"),
    ] {
        let r = till.post(with(charge(price), json!({ "quantity": quantity, "amount": "999.99" }))).await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["amount"], amount, "{quantity} x {price}; a sent amount is ignored");
    }
    let r = till.post(charge("10")).await;
    assert_eq!(r.body["data"]["quantity"], "1.000", "quantity defaults to 1");
    assert_eq!(r.body["data"]["amount"], "10.00");
    // A zero quantity makes a zero amount too.
    for (extra, fields) in [
        (json!({ "quantity": 0 }), &["quantity", "amount"][..]),
        (json!({ "quantity": -1 }), &["quantity"]),
        (json!({ "quantity": "1.0005" }), &["quantity"]),
        (json!({ "unit_price": "0.001" }), &["unit_price"]),
        (json!({ "unit_price": 0 }), &["amount"]),
        (json!({ "unit_price": null }), &["unit_price"]),
        (json!({ "kind": "fee" }), &["kind"]),
    ] {
        let r = till.post(with(charge("10"), extra.clone())).await;
        assert_eq!(r.status, 422, "{extra}: {}", r.text);
        assert_invalid(&r, fields);
    }
    assert_invalid(&till.post(json!({})).await, &["kind"]);
}

#[tokio::test]
async fn a_charge_takes_its_price_from_the_one_thing_it_names() {
    let till = Till::open().await;
    let app = till.app();
    let item = app
        .created(
            "/api/v1/bill-items",
            None,
            json!({ "code": "CONS", "name": "Consultation", "bill_item_category_id": 1, "unit_price": 250 }),
        )
        .await;
    let procedure = app
        .created(
            "/api/v1/procedures",
            None,
            json!({ "code": "YAG", "name": "YAG laser", "category": "laser", "price": 4000 }),
        )
        .await;
    let free = app
        .created(
            "/api/v1/procedures",
            None,
            json!({ "code": "CHAT", "name": "Counselling", "category": "other", "price": 300, "billable": false }),
        )
        .await;
    let service = app
        .created("/api/v1/services", None, json!({ "code": "OCT", "name": "OCT scan", "price": "1800.50" }))
        .await;
    let kinds = [
        ("bill_item_id", id_of(&item), "250.00"),
        ("procedure_id", id_of(&procedure), "4000.00"),
        ("service_id", id_of(&service), "1800.50"),
    ];
    for (field, id, price) in kinds {
        let r = till.post(json!({ "kind": "charge", field: id, "quantity": 2 })).await;
        assert_status(&r, 201);
        assert_eq!(r.body["data"]["unit_price"], price, "{field}");
        assert_eq!(r.body["data"]["amount"], cents(money(price) * Decimal::TWO), "{field}");
        assert_eq!(r.body["data"][field], id);
    }
    let r =
        till.post(json!({ "kind": "charge", "bill_item_id": id_of(&item), "unit_price": "199.99" })).await;
    assert_eq!(r.body["data"]["unit_price"], "199.99", "a given price wins: {}", r.text);
    let r = till.post(json!({ "kind": "charge", "procedure_id": id_of(&free) })).await;
    assert_invalid(&r, &["procedure_id"]);
    let r = till
        .post(json!({ "kind": "charge", "bill_item_id": id_of(&item), "service_id": id_of(&service) }))
        .await;
    assert_invalid(&r, &["service_id"]);
    let r = till.post(json!({ "kind": "charge", "procedure_id": id_of(&procedure), "service_id": id_of(&service), "unit_price": 5 })).await;
    assert_invalid(&r, &["service_id"]);
    assert_invalid(&till.post(json!({ "kind": "charge" })).await, &["unit_price"]);
    // Names must be live and active rows.
    assert_status(
        &app.patch(&format!("/api/v1/services/{}/toggle-status", id_of(&service)), None).await,
        200,
    );
    assert_invalid(
        &till.post(json!({ "kind": "charge", "service_id": id_of(&service) })).await,
        &["service_id"],
    );
    assert_invalid(&till.post(json!({ "kind": "charge", "bill_item_id": 999 })).await, &["bill_item_id"]);
}

#[tokio::test]
async fn an_insurance_covers_a_share_of_a_charge() {
    let till = Till::open().await;
    let app = till.app();
    let insurance = app
        .created(
            "/api/v1/insurances",
            None,
            json!({ "code": "HMO", "payer_name": "Acme", "coverage_percent": "12.5", "valid_from": day(-1) }),
        )
        .await;
    let insurance = id_of(&insurance);
    let r = till.post(with(charge("333.33"), json!({ "insurance_id": insurance }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["covered_amount"], "41.67", "333.33 x 12.5%, to the cent");
    let r =
        till.post(with(charge("100"), json!({ "insurance_id": insurance, "covered_amount": "100" }))).await;
    assert_eq!(r.body["data"]["covered_amount"], "100.00", "{}", r.text);
    let r = till
        .post(with(charge("100"), json!({ "insurance_id": insurance, "covered_amount": "100.01" })))
        .await;
    assert_invalid(&r, &["covered_amount"]);
    assert_invalid(
        &till.post(with(charge("100"), json!({ "covered_amount": 10 }))).await,
        &["covered_amount"],
    );
    let r = till.post(with(payment("10"), json!({ "insurance_id": insurance }))).await;
    assert_invalid(&r, &["insurance_id"]);
    let r = till.post(with(charge("100"), json!({ "insurance_id": 999 }))).await;
    assert_invalid(&r, &["insurance_id"]);
}

// ---------------------------------------------------------------------------------------
// What each kind carries
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn each_kind_carries_what_it_needs_and_nothing_else() {
    let till = Till::open().await;
    let missing_description = json!({ "kind": "discount", "amount": 5 });
    assert_invalid(&till.post(missing_description).await, &["description"]);
    let r = till
        .post(json!({ "kind": "refund", "amount": 5, "payment_method_id": CASH, "description": " " }))
        .await;
    assert_invalid(&r, &["description"]);
    assert_invalid(&till.post(json!({ "kind": "payment", "amount": 5 })).await, &["payment_method_id"]);
    assert_invalid(
        &till.post(json!({ "kind": "refund", "amount": 5, "description": "x" })).await,
        &["payment_method_id"],
    );
    assert_invalid(
        &till.post(with(charge("5"), json!({ "payment_method_id": CASH }))).await,
        &["payment_method_id"],
    );
    assert_invalid(
        &till.post(with(discount("5"), json!({ "payment_method_id": CASH }))).await,
        &["payment_method_id"],
    );
    for field in ["quantity", "unit_price"] {
        assert_invalid(&till.post(with(payment("5"), json!({ field: 1 }))).await, &[field]);
    }
    assert_invalid(&till.post(json!({ "kind": "payment", "payment_method_id": CASH })).await, &["amount"]);
    // A method that requires a reference gets one.
    let card = json!({ "kind": "payment", "amount": 5, "payment_method_id": CARD });
    assert_invalid(&till.post(card.clone()).await, &["reference"]);
    assert_invalid(&till.post(with(card.clone(), json!({ "reference": "  " }))).await, &["reference"]);
    let r = till.post(with(card, json!({ "reference": "AUTH-1234" }))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["reference"], "AUTH-1234");
    for method in 3..=5 {
        let r = till
            .post(json!({ "kind": "refund", "amount": 1, "payment_method_id": method, "description": "x" }))
            .await;
        assert_invalid(&r, &["reference"]);
    }
    let r = till.post(payment("5")).await;
    assert_status(&r, 201);
    assert!(r.body["data"]["quantity"].is_null() && r.body["data"]["unit_price"].is_null(), "{}", r.body);
    assert_status(&till.post(discount("5")).await, 201);
    assert_status(&till.post(refund("5")).await, 201);
    assert_invalid(
        &till.post(with(payment("5"), json!({ "payment_method_id": 999 }))).await,
        &["payment_method_id"],
    );
}

#[tokio::test]
async fn amounts_are_positive_exact_money_on_a_date_not_in_the_future() {
    let till = Till::open().await;
    for amount in
        [json!("abc"), json!("10.555"), json!(-5), json!(0), json!("0.00"), json!(true), json!("12345678901")]
    {
        let r = till.post(with(payment("1"), json!({ "amount": amount }))).await;
        assert_eq!(r.status, 422, "{amount}: {}", r.text);
        assert_invalid(&r, &["amount"]);
    }
    let r = till.post(with(payment("1"), json!({ "amount": "0.1" }))).await;
    assert_eq!(r.body["data"]["amount"], "0.10");
    assert_invalid(
        &till.post(with(payment("1"), json!({ "transaction_date": day(1) }))).await,
        &["transaction_date"],
    );
    assert_invalid(
        &till.post(with(payment("1"), json!({ "transaction_date": "2026-02-30" }))).await,
        &["transaction_date"],
    );
    let r = till.post(with(payment("1"), json!({ "transaction_date": "2026-01-05" }))).await;
    assert_eq!(r.body["data"]["transaction_date"], "2026-01-05");
    // The visit must be this patient's.
    let app = till.app();
    let other = id_of(&app.create_patient(till.clinic.branch, "Ben", "Reyes").await);
    let visit = app
        .created(
            "/api/v1/patient-visits",
            till.branch(),
            json!({ "patient_id": other, "visit_date": "2026-01-05" }),
        )
        .await;
    assert_invalid(
        &till.post(with(payment("1"), json!({ "patient_visit_id": id_of(&visit) }))).await,
        &["patient_visit_id"],
    );
    let r = till.post(with(payment("1"), json!({ "patient_visit_id": till.clinic.visit }))).await;
    assert_eq!(r.body["data"]["patient_visit_id"], till.clinic.visit);
    assert_invalid(&till.post(with(payment("1"), json!({ "status": "voided" }))).await, &["status"]);
}

// ---------------------------------------------------------------------------------------
// Posting, changing, voiding
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_open_transaction_changes_until_it_is_posted() {
    let till = Till::open().await;
    let id = id_of(&till.created(charge("100")).await);
    let member = till.member(id);
    let r =
        till.app().put(&member, till.branch(), json!({ "quantity": 2, "description": "Two visits" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["amount"], "200.00", "the amount follows");
    assert_eq!(r.body["data"]["number"], number(1), "the number stays");
    assert_invalid(&till.app().put(&member, till.branch(), json!({ "kind": "payment" })).await, &["kind"]);
    let r = till.app().put(&member, till.branch(), json!({ "status": "posted" })).await;
    assert_eq!(r.body["data"]["status"], "open", "status changes only by the post action: {}", r.text);

    let r = till.post_action(id).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "posted");
    let posted_at =
        r.body["data"]["posted_at"].as_str().unwrap_or_else(|| panic!("posted_at: {}", r.body)).to_owned();
    assert!(!posted_at.is_empty());
    let version = r.body["data"]["version"].as_i64().unwrap();
    let again = till.post_action(id).await;
    assert_error(&again, 409, "invalid_transition");
    assert_eq!(again.body["status"], "posted");
    let r = till.app().put(&member, till.branch(), json!({ "description": "Changed" })).await;
    assert_error(&r, 409, "transaction_posted");
    assert_eq!(r.body["status"], "posted");
    let r = till.app().get(&member, till.branch()).await;
    assert_eq!(r.body["data"]["description"], "Two visits");
    assert_eq!(r.body["data"]["version"], version);
    // Created posted: stamped like one posted later.
    let r = till.post(posted(payment("50"))).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["status"], "posted");
    assert!(r.body["data"]["posted_at"].is_string(), "{}", r.body);
    // A stale If-Match on post is 412.
    let open = id_of(&till.created(payment("1")).await);
    let stale = till
        .app()
        .request(Method::POST, &format!("{}/post", till.member(open)), till.branch())
        .header("if-match", "\"7\"");
    assert_error(&reply(stale).await, 412, "precondition_failed");
}

#[tokio::test]
async fn posting_keeps_refunds_within_payments_and_discounts_within_charges() {
    let till = Till::open().await;
    till.created(posted(charge("100"))).await;
    till.created(posted(payment("50"))).await;
    let too_much = id_of(&till.created(refund("60")).await);
    let r = till.post_action(too_much).await;
    assert_invalid(&r, &["amount"]);
    assert_eq!(
        till.app().get(&till.member(too_much), till.branch()).await.body["data"]["status"],
        "open",
        "nothing posted"
    );
    let before = till.count().await;
    assert_invalid(&till.post(posted(refund("50.01"))).await, &["amount"]);
    assert_eq!(till.count().await, before, "a refused posted create writes nothing");
    assert_status(&till.post(posted(refund("50"))).await, 201);
    let big = id_of(&till.created(discount("100.01")).await);
    assert_invalid(&till.post_action(big).await, &["amount"]);
    assert_status(&till.post(posted(discount("100"))).await, 201);
    // Open rows do not count.
    till.created(payment("1000")).await;
    assert_invalid(&till.post(posted(refund("1"))).await, &["amount"]);
}

#[tokio::test]
async fn concurrent_postings_of_one_patient_take_turns() {
    let till = Till::open().await;
    till.created(posted(payment("100"))).await;
    let mut refunds = Vec::new();
    for _ in 0..10 {
        refunds.push(id_of(&till.created(refund("30")).await));
    }
    let replies = join_all(refunds.iter().map(|id| till.post_action(*id))).await;
    let posted_count = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(posted_count, 3, "statuses: {:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    for r in replies.iter().filter(|r| r.status != 200) {
        assert_invalid(r, &["amount"]);
    }
    assert_eq!(till.summary().await["refunds"], "90.00");
    // Created posted at once: the same rule under the same lock.
    let replies = join_all((0..6).map(|_| till.post(posted(refund("5"))))).await;
    assert_eq!(replies.iter().filter(|r| r.status == 201).count(), 2);
    assert_eq!(till.summary().await["refunds"], "100.00");
}

#[tokio::test]
async fn deleting_removes_an_open_row_and_voids_a_posted_one() {
    let till = Till::open().await;
    let app = till.app();
    let open = id_of(&till.created(charge("10")).await);
    let r = app.delete(&till.member(open), till.branch()).await;
    assert_status(&r, 200);
    assert!(r.body["data"].is_null(), "a plain delete: {}", r.body);
    assert_error(&app.get(&till.member(open), till.branch()).await, 404, "not_found");
    assert_error(&till.post_action(open).await, 404, "not_found");

    let charged = id_of(&till.created(posted(charge("100"))).await);
    let paid = id_of(&till.created(posted(payment("40"))).await);
    assert_invalid(&app.delete(&till.member(paid), till.branch()).await, &["void_reason"]);
    assert_invalid(&till.void(paid, "  ").await, &["void_reason"]);
    assert_invalid(&till.void(paid, &"x".repeat(501)).await, &["void_reason"]);
    let r = till.void(paid, "Cheque bounced").await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["status"], "voided");
    assert_eq!(data["void_reason"], "Cheque bounced");
    assert!(data["voided_at"].is_string(), "{data}");
    let r = app.get(&till.member(paid), till.branch()).await;
    assert_eq!(r.body["data"]["status"], "voided", "the row is kept");
    let r = app.delete(&till.member(paid), till.branch()).await;
    assert_error(&r, 409, "invalid_transition");
    assert_eq!(r.body["status"], "voided");
    assert_error(&till.post_action(paid).await, 409, "invalid_transition");
    assert_error(
        &app.put(&till.member(paid), till.branch(), json!({ "description": "x" })).await,
        409,
        "transaction_posted",
    );
    // The reason may come in the query.
    let r = app.delete(&format!("{}?void_reason=Entered%20twice", till.member(charged)), till.branch()).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["void_reason"], "Entered twice");
    let summary = till.summary().await;
    assert_eq!((summary["charges"].as_str(), summary["payments"].as_str()), (Some("0.00"), Some("0.00")));
}

#[tokio::test]
async fn a_void_that_breaks_the_balance_is_refused() {
    let till = Till::open().await;
    let charged = id_of(&till.created(posted(charge("100"))).await);
    till.created(posted(discount("80"))).await;
    let r = till.void(charged, "Wrong patient").await;
    assert_error(&r, 409, "balance_conflict");
    assert_eq!(r.body["status"], "posted");
    let paid = id_of(&till.created(posted(payment("50"))).await);
    till.created(posted(refund("30"))).await;
    assert_error(&till.void(paid, "Reversed").await, 409, "balance_conflict");
    let r = till.app().get(&till.member(paid), till.branch()).await;
    assert_eq!(r.body["data"]["status"], "posted", "nothing changed");
    let more = id_of(&till.created(posted(payment("30"))).await);
    assert_status(&till.void(paid, "Reversed").await, 200);
    assert_error(&till.void(more, "Reversed").await, 409, "balance_conflict");
}

// ---------------------------------------------------------------------------------------
// Numbers and Idempotency-Key
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn numbers_are_consecutive_under_concurrency_and_failures_use_none() {
    let till = Till::open().await;
    assert_invalid(&till.post(json!({ "kind": "payment", "amount": 5 })).await, &["payment_method_id"]);
    assert_invalid(&till.post(posted(refund("5"))).await, &["amount"]);
    assert_eq!(till.created(charge("1")).await["number"], number(1), "refused creates used no number");
    let replies = join_all((0..20).map(|i| till.post(charge(&format!("{}.00", i + 1))))).await;
    for r in &replies {
        assert_status(r, 201);
    }
    let mut numbers: Vec<String> =
        replies.iter().map(|r| r.body["data"]["number"].as_str().unwrap().to_owned()).collect();
    numbers.sort();
    let expected: Vec<String> = (2..=21).map(number).collect();
    assert_eq!(numbers, expected, "gapless and unique");
    assert_eq!(till.count().await, 21);
    let r = till.list(&format!("search={}", number(7))).await;
    assert_eq!(column(&r.body, "number"), [number(7)]);
}

#[tokio::test]
async fn the_same_idempotency_key_sent_twice_at_once_creates_one_row() {
    let till = Till::open().await;
    let body = posted(payment("75"));
    let send = |key: &'static str, body: Value| {
        let req = till
            .app()
            .request(Method::POST, &till.path, till.branch())
            .header("idempotency-key", key)
            .json(&body);
        reply(req)
    };
    let both = join_all([send("pay-1", body.clone()), send("pay-1", body.clone())]).await;
    for r in &both {
        assert_status(r, 201);
    }
    assert_eq!(both[0].body, both[1].body, "the replay is the first answer");
    let replayed: Vec<Option<&str>> = both.iter().map(|r| r.header("idempotent-replayed")).collect();
    assert!(replayed.contains(&Some("true")) && replayed.contains(&None), "one replay: {replayed:?}");
    assert_eq!(till.count().await, 1);
    // A burst of the same request: one write, every other answer a replay of it.
    let burst = join_all((0..8).map(|_| send("pay-burst", payment("12")))).await;
    assert!(burst.iter().all(|r| r.status == 201 && r.body == burst[0].body), "one answer for all");
    let fresh = burst.iter().filter(|r| r.header("idempotent-replayed").is_none()).count();
    assert_eq!(fresh, 1);
    assert_eq!(till.count().await, 2);
    // Later too, and the summary counts it once.
    let r = send("pay-1", body.clone()).await;
    assert_status(&r, 201);
    assert_eq!(r.header("idempotent-replayed"), Some("true"));
    assert_eq!(r.body, both[0].body);
    assert_eq!(till.summary().await["payments"], "75.00", "the open burst payment is not posted");
    // The same key with another body.
    let r = send("pay-1", posted(payment("76"))).await;
    assert_error(&r, 409, "idempotency_key_reused");
    assert_eq!(till.count().await, 2);
    // Errors are not kept: a key whose request failed may be used again.
    let r = send("pay-2", json!({ "kind": "payment", "amount": 5 })).await;
    assert_invalid(&r, &["payment_method_id"]);
    assert_status(&send("pay-2", payment("5")).await, 201);
    assert_eq!(till.count().await, 3);
    let r = send("pay-3", payment("5")).await;
    assert_eq!(r.header("idempotent-replayed"), None, "another key is another request");
    let bad = till
        .app()
        .request(Method::POST, &till.path, till.branch())
        .header("idempotency-key", "has space")
        .json(&payment("5"));
    assert_error(&reply(bad).await, 400, "invalid_idempotency_key");
}

#[tokio::test]
async fn an_idempotency_key_replays_a_post_action() {
    let till = Till::open().await;
    let id = id_of(&till.created(charge("40")).await);
    let send = || {
        let path = format!("{}/post", till.member(id));
        let req = till.app().request(Method::POST, &path, till.branch()).header("idempotency-key", "post-1");
        reply(req.json(&json!({})))
    };
    let first = send().await;
    assert_status(&first, 200);
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = send().await;
    assert_status(&again, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body, "the first answer, not a 409");
    let rows = till.app().audit_rows(AUDIT, till.branch(), AUDITED_AS, id).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "post"], "posted once");
    // Without a key a second post is refused.
    assert_error(&till.post_action(id).await, 409, "invalid_transition");
}

// ---------------------------------------------------------------------------------------
// Lists and summary
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn lists_search_numbers_and_filter_dates_status_and_kind() {
    let till = Till::open().await;
    let old = id_of(&till.created(with(payment("5"), json!({ "transaction_date": "2026-01-05" }))).await);
    let mid =
        id_of(&till.created(posted(with(charge("9"), json!({ "transaction_date": "2026-02-10" })))).await);
    let new = id_of(&till.created(posted(discount("1"))).await);
    let r = till.list("").await;
    assert_eq!(ids(&r.body), vec![new, mid, old], "newest transaction date first");
    assert_eq!(ids(&till.list(&format!("search={}", number(2))).await.body), vec![mid]);
    assert_eq!(ids(&till.list("start_date=2026-01-01&end_date=2026-02-10").await.body), vec![mid, old]);
    assert_eq!(ids(&till.list(&format!("start_date={}", today())).await.body), vec![new]);
    assert_eq!(ids(&till.list("status=posted").await.body), vec![new, mid]);
    assert_eq!(ids(&till.list("filters[status]=open").await.body), vec![old]);
    assert_eq!(ids(&till.list("status=posted&filters[status]=posted").await.body), vec![new, mid]);
    assert_invalid(&till.list("status=posted&filters[status]=open").await, &["status"]);
    assert_eq!(ids(&till.list("filters[kind]=payment").await.body), vec![old]);
    assert_invalid(&till.list("filters[kind]=gift").await, &["filters[kind]"]);
    assert_eq!(ids(&till.list("sortField=amount&sortDirection=asc").await.body), vec![new, old, mid]);
}

#[tokio::test]
async fn the_summary_sums_posted_rows() {
    let till = Till::open().await;
    let app = till.app();
    let insurance = app
        .created(
            "/api/v1/insurances",
            None,
            json!({ "code": "HMO", "payer_name": "Acme", "coverage_percent": 30, "valid_from": day(-1) }),
        )
        .await;
    let empty = till.summary().await;
    for key in ["charges", "discounts", "payments", "refunds", "covered", "balance"] {
        assert_eq!(empty[key], "0.00", "{key}");
    }
    let bodies = [
        posted(with(charge("1200.50"), json!({ "insurance_id": id_of(&insurance) }))),
        posted(with(charge("33.33"), json!({ "quantity": 1.5 }))),
        posted(discount("100.25")),
        posted(payment("500")),
        posted(with(payment("250.10"), json!({ "payment_method_id": CARD, "reference": "R1" }))),
        posted(refund("20.05")),
        charge("999"),
        payment("999"),
    ];
    let mut rows = Vec::new();
    for body in bodies {
        rows.push(till.created(body).await);
    }
    // A voided payment and a deleted open charge count for nothing.
    let voided = till.created(posted(payment("10"))).await;
    assert_status(&till.void(id_of(&voided), "Mistake").await, 200);
    let deleted = till.created(charge("5")).await;
    assert_status(&app.delete(&till.member(id_of(&deleted)), till.branch()).await, 200);

    let sum = |kind: &str, field: &str| -> Decimal {
        rows.iter()
            .filter(|r| r["status"] == "posted" && r["kind"] == kind)
            .filter_map(|r| r[field].as_str().map(money))
            .sum()
    };
    let (charges, discounts, payments, refunds) = (
        sum("charge", "amount"),
        sum("discount", "amount"),
        sum("payment", "amount"),
        sum("refund", "amount"),
    );
    let covered = sum("charge", "covered_amount");
    let summary = till.summary().await;
    assert_eq!(summary["charges"], cents(charges));
    assert_eq!(summary["charges"], "1250.50", "1200.50 + 50.00");
    assert_eq!(summary["discounts"], cents(discounts));
    assert_eq!(summary["payments"], cents(payments));
    assert_eq!(summary["refunds"], cents(refunds));
    assert_eq!(summary["covered"], cents(covered));
    assert_eq!(summary["covered"], "360.15", "30% of 1200.50");
    assert_eq!(summary["balance"], cents(charges - discounts - payments + refunds));
    assert_eq!(summary["balance"], "420.20");
    let r = app.get("/api/v1/patients/999999/billing-summary", till.branch()).await;
    assert_error(&r, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// Reach, permissions, audit
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn another_patients_or_branchs_transactions_are_404() {
    let till = Till::open().await;
    let app = till.app();
    let north = app.create_branch("NORTH").await;
    let mut north_patient = 0;
    for i in 0..3 {
        north_patient = id_of(&app.create_patient(north, &format!("North{i}"), "Patient").await);
    }
    assert_eq!(north_patient, 3, "ids of a fresh branch start at 1");
    // Patient 3 exists in NORTH, not in MAIN.
    let foreign = transactions(north_patient);
    assert_error(&app.get(&foreign, till.branch()).await, 404, "not_found");
    assert_error(&app.post(&foreign, till.branch(), payment("5")).await, 404, "not_found");
    let r = app.get(&format!("/api/v1/patients/{north_patient}/billing-summary"), till.branch()).await;
    assert_error(&r, 404, "not_found");
    assert_status(&app.post(&foreign, Some(north), payment("5")).await, 201);

    let mine = id_of(&till.created(payment("5")).await);
    let other = id_of(&app.create_patient(till.clinic.branch, "Ben", "Reyes").await);
    let wrong = format!("{}/{mine}", transactions(other));
    assert_error(&app.get(&wrong, till.branch()).await, 404, "not_found");
    assert_error(&app.put(&wrong, till.branch(), json!({ "amount": 6 })).await, 404, "not_found");
    assert_error(&app.post(&format!("{wrong}/post"), till.branch(), json!({})).await, 404, "not_found");
    assert_error(&app.delete(&wrong, till.branch()).await, 404, "not_found");
    assert_eq!(ids(&app.get(&transactions(other), till.branch()).await.body), Vec::<i64>::new());
    let r = app.get(&till.member(mine), till.branch()).await;
    assert_eq!(r.body["data"]["amount"], "5.00", "untouched");
}

#[tokio::test]
async fn billing_needs_billing_permissions() {
    let till = Till::open().await;
    let app = till.app();
    let branch = till.clinic.branch;
    let id = id_of(&till.created(charge("10")).await);
    let (cashier_id, cashier) = app.create_user("till", &["cashier"], &[branch]).await;
    let r = app.call_as(&cashier, Method::POST, &till.path, Some(branch), payment("5")).await;
    assert_status(&r, 201);
    let r = app
        .call_as(&cashier, Method::POST, &format!("{}/post", till.member(id)), Some(branch), Value::Null)
        .await;
    assert_status(&r, 200);
    let summary = format!("/api/v1/patients/{}/billing-summary", till.clinic.patient);
    assert_status(&app.call_as(&cashier, Method::GET, &summary, Some(branch), Value::Null).await, 200);
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    assert_status(&app.call_as(&desk, Method::GET, &till.path, Some(branch), Value::Null).await, 200);
    assert_status(&app.call_as(&desk, Method::GET, &summary, Some(branch), Value::Null).await, 200);
    for (method, path, body) in [
        (Method::POST, till.path.clone(), payment("5")),
        (Method::PUT, till.member(id), json!({ "description": "x" })),
        (Method::POST, format!("{}/post", till.member(id)), Value::Null),
        (Method::DELETE, till.member(id), json!({ "void_reason": "x" })),
    ] {
        assert_error(&app.call_as(&desk, method, &path, Some(branch), body).await, 403, "forbidden");
    }
    let (_, nurse) = app.create_user("nurse", &["nurse"], &[branch]).await;
    assert_error(
        &app.call_as(&nurse, Method::GET, &till.path, Some(branch), Value::Null).await,
        403,
        "forbidden",
    );
    assert_error(
        &app.call_as(&nurse, Method::GET, &summary, Some(branch), Value::Null).await,
        403,
        "forbidden",
    );
    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, id).await;
    assert_eq!(rows.last().unwrap()["user_id"], cashier_id, "the post is the cashier's");
}

#[tokio::test]
async fn every_write_and_void_is_audited() {
    let till = Till::open().await;
    let app = till.app();
    let admin = app.admin_id().await;
    let kept = id_of(&till.created(charge("10")).await);
    assert_status(
        &app.put(&till.member(kept), till.branch(), json!({ "description": "Follow-up" })).await,
        200,
    );
    assert_status(&till.post_action(kept).await, 200);
    assert_status(&till.void(kept, "Wrong item").await, 200);
    let gone = id_of(&till.created(payment("3")).await);
    assert_status(&app.delete(&till.member(gone), till.branch()).await, 200);

    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "update", "post", "void"]);
    assert!(rows.iter().all(|r| r["user_id"] == admin));
    assert_eq!(rows[0]["after"]["number"], number(1));
    assert_eq!(rows[1]["before"]["description"], "Consultation");
    assert_eq!(rows[1]["after"]["description"], "Follow-up");
    assert_eq!(rows[2]["after"]["status"], "posted");
    assert_eq!(rows[3]["before"]["status"], "posted");
    assert_eq!(rows[3]["after"]["status"], "voided");
    assert_eq!(rows[3]["after"]["void_reason"], "Wrong item");
    let rows = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, gone).await;
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "delete"]);
    // Refused writes leave no trace.
    let before = app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await.len();
    assert_error(&till.void(kept, "Again").await, 409, "invalid_transition");
    assert_eq!(app.audit_rows(AUDIT, till.branch(), AUDITED_AS, kept).await.len(), before);
}

#[tokio::test]
async fn openapi_describes_billing_transactions_and_the_summary() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/docs/api/openapi.json"))).await;
    assert_status(&r, 200);
    let paths = &r.body["paths"];
    let collection = "/api/v1/patients/{patient_id}/billing-transactions";
    let member = format!("{collection}/{{id}}");
    for (path, verbs) in [
        (collection.to_owned(), &["get", "post"][..]),
        (member.clone(), &["get", "put", "delete"]),
        (format!("{member}/post"), &["post"]),
        ("/api/v1/patients/{id}/billing-summary".to_owned(), &["get"]),
    ] {
        for verb in verbs {
            assert!(paths[&path][*verb].is_object(), "{verb} {path} is not documented");
        }
    }
    let schemas = &r.body["components"]["schemas"];
    let amount = &schemas["BillingTransaction"]["properties"]["amount"];
    assert_eq!(amount["pattern"], "^-?[0-9]+\\.[0-9]{2}$", "money is a string with 2 decimals: {amount}");
    assert!(
        schemas["BillingTransactionInput"]["required"].as_array().is_some_and(|r| r.contains(&json!("kind")))
    );
}

// ---------------------------------------------------------------------------------------
// Limits: what the server computes fits its column, and sums never overflow
// ---------------------------------------------------------------------------------------

/// The largest money value a record holds (10 integer digits, 2 decimals).
const LARGEST: &str = "9999999999.99";

#[tokio::test]
async fn a_computed_amount_past_the_largest_money_is_422_on_the_quantity() {
    let till = Till::open().await;
    let r = till.post(with(charge(LARGEST), json!({ "quantity": "2" }))).await;
    assert_invalid(&r, &["quantity"]);
    assert!(r.body["errors"]["quantity"][0].as_str().unwrap().contains(LARGEST), "{}", r.text);
    assert_eq!(till.count().await, 0, "nothing is written");
    // At the limit exactly it fits, and so does an insurance share of all of it.
    let insurance = id_of(
        &till
            .app()
            .created(
                "/api/v1/insurances",
                None,
                json!({ "code": "FULL", "payer_name": "Payer", "coverage_percent": "100", "valid_from": "2020-01-01" }),
            )
            .await,
    );
    let at_limit = till.created(with(charge(LARGEST), json!({ "insurance_id": insurance }))).await;
    assert_eq!(at_limit["amount"], LARGEST);
    assert_eq!(at_limit["covered_amount"], LARGEST);
    // A change that makes it overflow is refused the same way, and the row keeps its amount.
    let r =
        till.app().put(&till.member(id_of(&at_limit)), till.branch(), json!({ "quantity": "1.001" })).await;
    assert_invalid(&r, &["quantity"]);
    let kept = till.app().get(&till.member(id_of(&at_limit)), till.branch()).await;
    assert_eq!(kept.body["data"]["amount"], LARGEST);
}

#[tokio::test]
async fn totals_past_ten_to_the_twelfth_stay_exact_in_the_summary_and_the_dashboard() {
    let till = Till::open().await;
    for _ in 0..101 {
        till.created(posted(charge(LARGEST))).await;
    }
    till.created(posted(with(payment("0.01"), json!({ "payment_method_id": CASH })))).await;
    let expected = money(LARGEST) * Decimal::from(101);
    assert!(expected > Decimal::from(1_000_000_000_000i64));
    let summary = till.summary().await;
    assert_eq!(summary["charges"], cents(expected));
    assert_eq!(summary["payments"], "0.01");
    assert_eq!(summary["balance"], cents(expected - money("0.01")));
    let stats = till.app().get("/api/v1/dashboard/stats", till.branch()).await;
    assert_status(&stats, 200);
    assert_eq!(stats.body["data"]["billing"]["charges"], cents(expected), "{}", stats.text);
    assert_eq!(
        stats.body["data"]["billing"]["outstanding"],
        cents(expected - money("0.01")),
        "{}",
        stats.text
    );
}
