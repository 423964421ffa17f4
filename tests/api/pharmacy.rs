//! Pharmacy and inventory: the stock ledger and its levels,
//! no overselling under concurrency, FEFO, receiving against purchase orders, voids,
//! transfers, gapless numbers, branch reach and `clinic-server stock check`. Over HTTP
//! against a real server and a fresh database.

use std::str::FromStr;

use futures_util::future::join_all;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, ids, reply};

fn qty(value: &Value) -> Decimal {
    Decimal::from_str(value.as_str().unwrap_or_else(|| panic!("not a quantity: {value}"))).unwrap()
}

fn day(offset: i64) -> String {
    (time::OffsetDateTime::now_utc().date() + time::Duration::days(offset)).to_string()
}

/// A pharmacy ready for stock work: the server, branch MAIN and one item without expiry.
struct Pharmacy {
    app: TestApp,
    branch: i64,
    item: i64,
}

impl Pharmacy {
    async fn open() -> Self {
        let app = TestApp::spawn().await;
        let branch = app.main_branch().await;
        let item = id_of(
            &app.created(
                "/api/v1/pharmacy-items",
                None,
                json!({ "code": "TIMOLOL", "name": "Timolol 0.5% drops", "unit": "bottle", "sale_price": "120.00",
                        "has_expiry": false }),
            )
            .await,
        );
        Self { app, branch, item }
    }

    /// An item whose lots expire.
    async fn expiring_item(&self, code: &str) -> i64 {
        id_of(
            &self
                .app
                .created(
                    "/api/v1/pharmacy-items",
                    None,
                    json!({ "code": code, "name": format!("Item {code}"), "unit": "box", "sale_price": "10.00" }),
                )
                .await,
        )
    }

    /// A lot of `item` in `branch` holding `on_hand` (put there by an adjustment movement).
    async fn lot(&self, branch: i64, item: i64, lot_no: &str, expiry: Option<&str>, on_hand: i64) -> i64 {
        let lot = id_of(
            &self
                .app
                .created(
                    "/api/v1/stock-availables",
                    None,
                    json!({ "branch_id": branch, "pharmacy_item_id": item, "lot_no": lot_no, "expiry_date": expiry }),
                )
                .await,
        );
        if on_hand > 0 {
            self.adjust(lot, on_hand).await;
        }
        lot
    }

    async fn adjust(&self, lot: i64, quantity: i64) -> Reply {
        self.app
            .post(
                "/api/v1/stock-movements",
                None,
                json!({ "branch_id": self.branch, "stock_available_id": lot, "kind": "adjustment",
                        "quantity": quantity.to_string(), "reason": "Count" }),
            )
            .await
    }

    async fn on_hand(&self, lot: i64) -> Decimal {
        let r = self.app.get(&format!("/api/v1/stock-availables/{lot}"), None).await;
        assert_status(&r, 200);
        qty(&r.body["data"]["on_hand"])
    }

    /// A draft transaction of `lines` at MAIN.
    async fn transaction(&self, lines: Value) -> i64 {
        id_of(
            &self
                .app
                .created("/api/v1/transactions", None, json!({ "branch_id": self.branch, "lines": lines }))
                .await,
        )
    }

    async fn complete(&self, transaction: i64) -> Reply {
        self.app.post(&format!("/api/v1/transactions/{transaction}/complete"), None, json!({})).await
    }

    async fn supplier(&self) -> i64 {
        id_of(&self.app.created("/api/v1/suppliers", None, json!({ "name": "Optima Pharma" })).await)
    }

    /// Movements of a lot, oldest first.
    async fn movements(&self, lot: i64) -> Vec<Value> {
        let r = self
            .app
            .get(
                &format!(
                    "/api/v1/stock-movements?perPage=100&sortField=created_at&sortDirection=asc&filters[stock_available_id]={lot}"
                ),
                None,
            )
            .await;
        assert_status(&r, 200);
        r.body["data"].as_array().cloned().unwrap()
    }

    /// Every lot's level equals the sum of its movements, and `quantity_after` runs with them.
    async fn assert_ledger_holds(&self) {
        let client = self.app.state.registry.get().await.unwrap();
        let drift = clinic_server::pharmacy::ledger::drift(&client).await.expect("drift check runs");
        assert!(drift.is_empty(), "ledger drift: {drift:?}");
    }
}

fn one_unit(item: i64) -> Value {
    json!([{ "pharmacy_item_id": item, "quantity": "1" }])
}

#[tokio::test]
async fn fifty_concurrent_completions_never_oversell() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "L-1", None, 20).await;
    let mut drafts = Vec::new();
    for _ in 0..50 {
        drafts.push(p.transaction(one_unit(p.item)).await);
    }
    let answers = join_all(drafts.iter().map(|id| p.complete(*id))).await;
    let completed = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(completed, 20, "completions");
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_error(r, 409, "insufficient_stock");
    }
    assert_eq!(p.on_hand(lot).await, Decimal::ZERO);
    let dispensed: Vec<Value> =
        p.movements(lot).await.into_iter().filter(|m| m["kind"] == "dispense").collect();
    assert_eq!(dispensed.len(), 20);
    // The refused ones are still drafts, with no allocation written.
    let r = p.app.get("/api/v1/transactions?perPage=100&filters[status]=draft", None).await;
    assert_eq!(r.body["meta"]["total"], 30, "{}", r.text);
    for row in r.body["data"].as_array().unwrap() {
        assert_eq!(row["lines"][0]["allocations"], json!([]), "{row}");
    }
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_line_without_a_lot_takes_the_earliest_expiring_unexpired_lots_first() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("ATROPINE").await;
    // Lots made in an order unlike their expiry, and one already expired: expired lots are
    // made through SQL, as the API refuses a past expiry on receipt.
    let late = p.lot(p.branch, item, "LATE", Some(&day(300)), 10).await;
    let early = p.lot(p.branch, item, "EARLY", Some(&day(30)), 4).await;
    let expired = p.lot(p.branch, item, "GONE", Some(&day(10)), 50).await;
    {
        let client = p.app.state.registry.get().await.unwrap();
        client
            .execute("UPDATE stock_availables SET expiry_date = current_date - 1 WHERE id = $1", &[&expired])
            .await
            .unwrap();
    }
    let tx = p.transaction(json!([{ "pharmacy_item_id": item, "quantity": "6" }])).await;
    let r = p.complete(tx).await;
    assert_status(&r, 200);
    assert_eq!(
        r.body["data"]["lines"][0]["allocations"],
        json!([{ "stock_available_id": early, "quantity": "4.000" }, { "stock_available_id": late, "quantity": "2.000" }]),
        "{}",
        r.text
    );
    assert_eq!(p.on_hand(early).await, Decimal::ZERO);
    assert_eq!(p.on_hand(late).await, Decimal::from(8));
    assert_eq!(p.on_hand(expired).await, Decimal::from(50), "an expired lot is never picked");
    // More than the unexpired lots hold: refused, and nothing moves although the expired
    // lot alone would have covered it.
    let tx = p.transaction(json!([{ "pharmacy_item_id": item, "quantity": "9" }])).await;
    assert_error(&p.complete(tx).await, 409, "insufficient_stock");
    assert_eq!(p.on_hand(late).await, Decimal::from(8));
    assert_eq!(p.movements(late).await.len(), 2);
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_purchase_order_is_received_in_parts_and_never_over_received() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = p
        .app
        .created(
            "/api/v1/purchase-orders",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier,
                    "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": "10", "unit_cost": "80.00" }] }),
        )
        .await;
    let order_id = id_of(&order);
    assert_eq!(order["status"], "draft");
    assert_eq!(order["total"], "800.00");
    let r = p.app.post(&format!("/api/v1/purchase-orders/{order_id}/order"), None, json!({})).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "ordered");

    let draft = |quantity: &'static str| {
        p.app.post(
            "/api/v1/deliveries",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier, "purchase_order_id": order_id,
                    "lines": [{ "pharmacy_item_id": p.item, "lot_no": "B-7", "quantity": quantity }] }),
        )
    };
    let app = &p.app;
    let post = |delivery: i64| async move {
        app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await
    };
    let order_now = || async {
        let r = p.app.get(&format!("/api/v1/purchase-orders/{order_id}"), None).await;
        r.body["data"].clone()
    };

    let first = id_of(&draft("4").await);
    assert_status(&post(first).await, 200);
    let after_first = order_now().await;
    assert_eq!(after_first["status"], "partially_received");
    assert_eq!(after_first["lines"][0]["quantity_received"], "4.000");

    // Seven more than the six still due: 422 on the line, and the delivery stays a draft.
    let too_many = id_of(&draft("7").await);
    assert_invalid(&post(too_many).await, &["lines.0.quantity"]);
    assert_eq!(
        p.app.get(&format!("/api/v1/deliveries/{too_many}"), None).await.body["data"]["status"],
        "draft"
    );
    assert_eq!(order_now().await["lines"][0]["quantity_received"], "4.000");

    let second = id_of(&draft("6").await);
    assert_status(&post(second).await, 200);
    let after_second = order_now().await;
    assert_eq!(after_second["status"], "received");
    assert_eq!(after_second["lines"][0]["quantity_received"], "10.000");

    // The lot holds both receipts, each a receipt movement of its delivery.
    let lots =
        p.app.get(&format!("/api/v1/stock-availables?filters[pharmacy_item_id]={}", p.item), None).await;
    let lot = ids(&lots.body)[0];
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));
    let receipts = p.movements(lot).await;
    assert_eq!(
        receipts.iter().map(|m| m["delivery_id"].as_i64().unwrap()).collect::<Vec<_>>(),
        [first, second]
    );

    // A fully received order takes no further delivery: the third one is refused (422) and
    // the draft delivered earlier can no longer be posted either.
    assert_invalid(&draft("1").await, &["purchase_order_id"]);
    assert_invalid(&post(too_many).await, &["purchase_order_id"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));

    // A posted delivery is immutable.
    assert_error(
        &p.app.put(&format!("/api/v1/deliveries/{first}"), None, json!({ "notes": "x" })).await,
        409,
        "not_editable",
    );
    assert_error(&p.app.delete(&format!("/api/v1/deliveries/{first}"), None).await, 409, "not_editable");
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn voiding_a_completed_transaction_returns_its_stock() {
    let p = Pharmacy::open().await;
    let first = p.lot(p.branch, p.item, "A", None, 3).await;
    let second = p.lot(p.branch, p.item, "B", None, 5).await;
    let tx = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "6" }])).await;
    assert_status(&p.complete(tx).await, 200);
    assert_eq!(p.on_hand(first).await + p.on_hand(second).await, Decimal::from(2));

    let r = p.app.post(&format!("/api/v1/transactions/{tx}/void"), None, json!({})).await;
    assert_invalid(&r, &["void_reason"]);
    let r = p
        .app
        .post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Wrong patient" }))
        .await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "voided");
    assert_eq!(p.on_hand(first).await, Decimal::from(3));
    assert_eq!(p.on_hand(second).await, Decimal::from(5));
    let mut returns = 0;
    for lot in [first, second] {
        returns += p.movements(lot).await.iter().filter(|m| m["kind"] == "return").count();
    }
    assert_eq!(returns, 2);
    // Voided once: a second void is a refused move, and it returns nothing more.
    let again =
        p.app.post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Again" })).await;
    assert_error(&again, 409, "invalid_transition");
    assert_eq!(p.on_hand(first).await, Decimal::from(3));
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn twenty_concurrent_purchase_orders_get_twenty_consecutive_numbers() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let body = json!({ "branch_id": p.branch, "supplier_id": supplier,
                       "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": "1", "unit_cost": "1.00" }] });
    // A refused creation takes no number.
    let refused = p
        .app
        .post(
            "/api/v1/purchase-orders",
            None,
            json!({ "branch_id": p.branch, "supplier_id": supplier, "lines": [] }),
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    let answers = join_all((0..20).map(|_| p.app.post("/api/v1/purchase-orders", None, body.clone()))).await;
    let year = time::OffsetDateTime::now_utc().year();
    let mut numbers: Vec<String> = answers
        .iter()
        .map(|r| {
            assert_status(r, 201);
            r.body["data"]["number"].as_str().unwrap().to_owned()
        })
        .collect();
    numbers.sort();
    let expected: Vec<String> = (1..=20).map(|n| format!("PO-MAIN-{year}-{n:06}")).collect();
    assert_eq!(numbers, expected);
}

#[tokio::test]
async fn the_ledger_is_append_only_and_runs_with_the_level() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "L", None, 0).await;
    assert_status(&p.adjust(lot, 7).await, 201);
    let r = p
        .app
        .post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "damaged", "quantity": "-2", "reason": "Broken" }),
        )
        .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["quantity_after"], "5.000");
    // Going below zero: refused, nothing written.
    assert_error(&p.adjust(lot, -6).await, 409, "insufficient_stock");
    let movements = p.movements(lot).await;
    assert_eq!(movements.len(), 2);
    assert_eq!(
        movements.iter().map(|m| m["quantity_after"].as_str().unwrap()).collect::<Vec<_>>(),
        ["7.000", "5.000"]
    );
    assert_eq!(p.on_hand(lot).await, Decimal::from(5));
    // Kinds written only by deliveries and transactions, and wrong signs, are refused.
    for (kind, quantity) in [("receipt", "3"), ("dispense", "-1"), ("damaged", "2")] {
        let r = p
            .app
            .post(
                "/api/v1/stock-movements",
                None,
                json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": kind, "quantity": quantity, "reason": "x" }),
            )
            .await;
        assert_eq!(r.status, 422, "{kind} {quantity}: {}", r.text);
    }
    // Movements never change.
    let first = id_of(&movements[0]);
    assert_error(
        &p.app.put(&format!("/api/v1/stock-movements/{first}"), None, json!({ "reason": "Changed" })).await,
        409,
        "ledger_immutable",
    );
    assert_error(
        &p.app.delete(&format!("/api/v1/stock-movements/{first}"), None).await,
        409,
        "ledger_immutable",
    );
    // A lot with stock cannot be deleted.
    assert_error(
        &p.app.delete(&format!("/api/v1/stock-availables/{lot}"), None).await,
        409,
        "stock_not_empty",
    );
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_transfer_moves_stock_between_branches_in_one_transaction() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let lot = p.lot(p.branch, p.item, "T-1", None, 10).await;
    let transfer = |quantity: &str| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "transfer_out", "quantity": quantity,
                    "reason": "Restock North", "to_branch_id": north }),
        )
    };
    // More than the lot holds: refused, and no lot or movement appears at North.
    assert_error(&transfer("-11").await, 409, "insufficient_stock");
    let at_north = p.app.get(&format!("/api/v1/stock-availables?filters[branch_id]={north}"), None).await;
    assert_eq!(at_north.body["meta"]["total"], 0, "{}", at_north.text);

    let r = transfer("-4").await;
    assert_status(&r, 201);
    let out = r.body["data"].clone();
    assert_eq!(out["kind"], "transfer_out");
    let counterpart = out["counterpart_id"].as_i64().expect("linked to its transfer_in");
    let incoming =
        p.app.get(&format!("/api/v1/stock-movements/{counterpart}"), None).await.body["data"].clone();
    assert_eq!(incoming["kind"], "transfer_in");
    assert_eq!(incoming["branch_id"], north);
    assert_eq!(incoming["quantity"], "4.000");
    assert_eq!(incoming["counterpart_id"], id_of(&out));
    let north_lot = incoming["stock_available_id"].as_i64().unwrap();
    let north_lot_row =
        p.app.get(&format!("/api/v1/stock-availables/{north_lot}"), None).await.body["data"].clone();
    assert_eq!(north_lot_row["lot_no"], "T-1");
    assert_eq!(p.on_hand(north_lot).await, Decimal::from(4));
    assert_eq!(p.on_hand(lot).await, Decimal::from(6));
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn rows_of_a_branch_are_seen_and_written_only_by_its_users() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let north_lot = p.lot(north, p.item, "N-1", None, 3).await;
    let main_lot = p.lot(p.branch, p.item, "M-1", None, 3).await;
    let (_, pharmacist) = p.app.create_user("pharmacist", &["admin"], &[p.branch]).await;
    let lots = p.app.call_as(&pharmacist, Method::GET, "/api/v1/stock-availables", None, Value::Null).await;
    assert_status(&lots, 200);
    assert_eq!(ids(&lots.body), vec![main_lot], "only MAIN's lots are listed");
    let r = p
        .app
        .call_as(
            &pharmacist,
            Method::GET,
            &format!("/api/v1/stock-availables/{north_lot}"),
            None,
            Value::Null,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = p
        .app
        .call_as(
            &pharmacist,
            Method::POST,
            "/api/v1/stock-availables",
            None,
            json!({ "branch_id": north, "pharmacy_item_id": p.item, "lot_no": "X" }),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);

    // A patient named on a transaction is a patient of that transaction's branch: North has
    // patients 1 and 2, MAIN only 1.
    p.app.create_patient(north, "Nora", "Reyes").await;
    let north_only = id_of(&p.app.create_patient(north, "Nilo", "Reyes").await);
    let main_patient = id_of(&p.app.create_patient(p.branch, "Mara", "Santos").await);
    assert!(north_only > main_patient);
    let body =
        |patient: i64| json!({ "branch_id": p.branch, "patient_id": patient, "lines": one_unit(p.item) });
    assert_invalid(&p.app.post("/api/v1/transactions", None, body(north_only)).await, &["patient_id"]);
    assert_status(&p.app.post("/api/v1/transactions", None, body(main_patient)).await, 201);
}

#[tokio::test]
async fn stock_lists_filter_expiring_and_low_lots() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("CYCLO").await;
    let soon = p.lot(p.branch, item, "SOON", Some(&day(5)), 1).await;
    let _later = p.lot(p.branch, item, "LATER", Some(&day(200)), 1).await;
    let r = p.app.get("/api/v1/stock-availables?filters[expiring_within_days]=30", None).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body), vec![soon]);
    let r = p.app.get("/api/v1/stock-availables?filters[expiring_within_days]=-1", None).await;
    assert_eq!(r.status, 422, "{}", r.text);

    // Low stock: the item's level over the branch (2) at or below its reorder level.
    let r = p.app.get("/api/v1/stock-availables?filters[below_reorder]=true", None).await;
    assert_eq!(r.body["meta"]["total"], 0, "no reorder level, never low: {}", r.text);
    let item_row = p.app.get(&format!("/api/v1/pharmacy-items/{item}"), None).await;
    let version = item_row.body["data"]["version"].as_i64().unwrap();
    let r = reply(
        p.app
            .request(Method::PUT, &format!("/api/v1/pharmacy-items/{item}"), None)
            .header("if-match", format!("\"{version}\""))
            .json(&json!({ "reorder_level": "2" })),
    )
    .await;
    assert_status(&r, 200);
    let r = p.app.get("/api/v1/stock-availables?filters[below_reorder]=true", None).await;
    assert_eq!(r.body["meta"]["total"], 2, "both lots of the low item: {}", r.text);

    // The item toggles between active and inactive.
    let r = p.app.patch(&format!("/api/v1/pharmacy-items/{item}/toggle-status"), None).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "inactive");
}

#[tokio::test]
async fn stock_check_passes_on_a_true_ledger_and_names_a_lot_changed_behind_its_back() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "C-1", None, 9).await;
    let tx = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "2" }])).await;
    assert_status(&p.complete(tx).await, 200);
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"))
            .args(["stock", "check"])
            .env("DATABASE_URL", &p.app.db.url)
            .env("RUST_LOG", "warn")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .expect("the binary runs")
    };
    let good = check();
    assert!(good.status.success(), "{good:?}");
    {
        let client = p.app.state.registry.get().await.unwrap();
        client
            .execute("UPDATE stock_availables SET on_hand = on_hand + 1 WHERE id = $1", &[&lot])
            .await
            .unwrap();
    }
    let bad = check();
    assert!(!bad.status.success(), "{bad:?}");
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(out.contains(&format!("lot {lot}:")), "{out}");
}

// ---------------------------------------------------------------------------------------
// Limits, crossing transfers, drafts that wait, and lots kept for the ledger
// ---------------------------------------------------------------------------------------

const LARGEST_MONEY: &str = "9999999999.99";
const LARGEST_QUANTITY: &str = "999999999.999";

#[tokio::test]
async fn line_totals_and_totals_past_the_largest_money_are_422_on_what_makes_them() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = |lines: Value| json!({ "branch_id": p.branch, "supplier_id": supplier, "lines": lines });
    let line = |quantity: &str, cost: &str| json!({ "pharmacy_item_id": p.item, "quantity_ordered": quantity, "unit_cost": cost });
    let r = p
        .app
        .post("/api/v1/purchase-orders", None, order(json!([line(LARGEST_QUANTITY, LARGEST_MONEY)])))
        .await;
    assert_invalid(&r, &["lines.0.quantity_ordered"]);
    // At the limit exactly it fits.
    let at_limit =
        p.app.created("/api/v1/purchase-orders", None, order(json!([line("1", LARGEST_MONEY)]))).await;
    assert_eq!(at_limit["total"], LARGEST_MONEY);
    assert_eq!(at_limit["lines"][0]["line_total"], LARGEST_MONEY);
    // Lines that fit one by one but not together: 422 on the lines.
    let other = p.expiring_item("OTHER").await;
    let two = json!([line("1", "5000000000.00"),
                     { "pharmacy_item_id": other, "quantity_ordered": "1", "unit_cost": "5000000000.00" }]);
    assert_invalid(&p.app.post("/api/v1/purchase-orders", None, order(two)).await, &["lines"]);

    let delivery = json!({ "branch_id": p.branch, "supplier_id": supplier,
        "lines": [{ "pharmacy_item_id": p.item, "lot_no": "BIG", "quantity": LARGEST_QUANTITY, "unit_cost": LARGEST_MONEY }] });
    assert_invalid(&p.app.post("/api/v1/deliveries", None, delivery).await, &["lines.0.quantity"]);

    let dispensing =
        json!([{ "pharmacy_item_id": p.item, "quantity": LARGEST_QUANTITY, "unit_price": LARGEST_MONEY }]);
    let r =
        p.app.post("/api/v1/transactions", None, json!({ "branch_id": p.branch, "lines": dispensing })).await;
    assert_invalid(&r, &["lines.0.quantity"]);
    let client = p.app.state.registry.get().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM transactions)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "nothing refused was written");
}

#[tokio::test]
async fn a_level_past_the_largest_quantity_is_422_and_the_level_stays() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "FULL", None, 999_999_999).await;
    let add = |quantity: &str| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": p.branch, "stock_available_id": lot, "kind": "adjustment", "quantity": quantity,
                    "reason": "Count" }),
        )
    };
    assert_status(&add("0.999").await, 201);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    let r = add("0.001").await;
    assert_invalid(&r, &["quantity"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    // A delivery into the full lot is refused on its line when posted, and receives nothing.
    let supplier = p.supplier().await;
    let delivery = id_of(
        &p.app
            .created(
                "/api/v1/deliveries",
                None,
                json!({ "branch_id": p.branch, "supplier_id": supplier,
                        "lines": [{ "pharmacy_item_id": p.item, "lot_no": "FULL", "quantity": "1", "unit_cost": "1" }] }),
            )
            .await,
    );
    let r = p.app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await;
    assert_invalid(&r, &["lines.0.quantity"]);
    assert_eq!(p.on_hand(lot).await, Decimal::from_str(LARGEST_QUANTITY).unwrap());
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn twenty_crossing_transfers_between_two_branches_all_go_through() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let here = p.lot(p.branch, p.item, "X-1", None, 100).await;
    let there = p.lot(north, p.item, "X-1", None, 0).await;
    let stock = json!({ "branch_id": north, "stock_available_id": there, "kind": "adjustment", "quantity": "100",
                        "reason": "Count" });
    assert_status(&p.app.post("/api/v1/stock-movements", None, stock).await, 201);
    let transfer = |from: i64, lot: i64, to: i64| {
        p.app.post(
            "/api/v1/stock-movements",
            None,
            json!({ "branch_id": from, "stock_available_id": lot, "kind": "transfer_out", "quantity": "-1",
                    "reason": "Balance stock", "to_branch_id": to }),
        )
    };
    let sends = (0..20)
        .map(|i| if i % 2 == 0 { transfer(p.branch, here, north) } else { transfer(north, there, p.branch) });
    let answers = join_all(sends).await;
    for r in &answers {
        assert_status(r, 201);
    }
    assert_eq!(p.on_hand(here).await, Decimal::from(100));
    assert_eq!(p.on_hand(there).await, Decimal::from(100));
    for lot in [here, there] {
        let moves = p.movements(lot).await;
        assert_eq!(moves.iter().filter(|m| m["kind"] == "transfer_out").count(), 10);
        assert_eq!(moves.iter().filter(|m| m["kind"] == "transfer_in").count(), 10);
    }
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_draft_is_not_completed_from_a_lot_that_expired_or_went_inactive_since() {
    let p = Pharmacy::open().await;
    let item = p.expiring_item("DROPS").await;
    let lot = p.lot(p.branch, item, "E-1", Some(&day(30)), 10).await;
    let named = json!([{ "pharmacy_item_id": item, "stock_available_id": lot, "quantity": "2" }]);
    let draft = p.transaction(named.clone()).await;
    // The expiry is corrected to yesterday after the draft was made.
    assert_status(
        &p.app.put(&format!("/api/v1/stock-availables/{lot}"), None, json!({ "expiry_date": day(-1) })).await,
        200,
    );
    let r = p.complete(draft).await;
    assert_invalid(&r, &["lines.0.stock_available_id"]);
    let still = p.app.get(&format!("/api/v1/transactions/{draft}"), None).await;
    assert_eq!(still.body["data"]["status"], "draft");
    assert_eq!(p.on_hand(lot).await, Decimal::from(10));

    // A lot made inactive, and an item made inactive, are refused the same way.
    let fresh = p.lot(p.branch, item, "E-2", Some(&day(30)), 10).await;
    let draft = p
        .transaction(json!([{ "pharmacy_item_id": item, "stock_available_id": fresh, "quantity": "1" }]))
        .await;
    assert_status(
        &p.app.put(&format!("/api/v1/stock-availables/{fresh}"), None, json!({ "active": false })).await,
        200,
    );
    assert_invalid(&p.complete(draft).await, &["lines.0.stock_available_id"]);
    let unnamed = p.transaction(json!([{ "pharmacy_item_id": p.item, "quantity": "1" }])).await;
    p.lot(p.branch, p.item, "P-1", None, 5).await;
    assert_status(&p.app.patch(&format!("/api/v1/pharmacy-items/{}/toggle-status", p.item), None).await, 200);
    assert_invalid(&p.complete(unnamed).await, &["lines.0.pharmacy_item_id"]);
    p.assert_ledger_holds().await;
}

#[tokio::test]
async fn a_lot_in_the_ledger_is_never_deleted_so_a_void_always_finds_it() {
    let p = Pharmacy::open().await;
    let lot = p.lot(p.branch, p.item, "V-1", None, 2).await;
    let tx = p
        .transaction(json!([{ "pharmacy_item_id": p.item, "stock_available_id": lot, "quantity": "2" }]))
        .await;
    assert_status(&p.complete(tx).await, 200);
    assert_eq!(p.on_hand(lot).await, Decimal::ZERO);
    // Emptied, but in the ledger: kept.
    assert_error(&p.app.delete(&format!("/api/v1/stock-availables/{lot}"), None).await, 409, "in_use");
    let r = p.app.put(&format!("/api/v1/stock-availables/{lot}"), None, json!({ "active": false })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["active"], false);
    // An inactive lot is not picked for new dispensing.
    let next = p.transaction(one_unit(p.item)).await;
    assert_error(&p.complete(next).await, 409, "insufficient_stock");
    // The void finds the lot and puts the stock back.
    let r = p
        .app
        .post(&format!("/api/v1/transactions/{tx}/void"), None, json!({ "void_reason": "Returned" }))
        .await;
    assert_status(&r, 200);
    assert_eq!(p.on_hand(lot).await, Decimal::from(2));
    // A lot that never moved may still go.
    let unused = p.lot(p.branch, p.item, "V-2", None, 0).await;
    assert_status(&p.app.delete(&format!("/api/v1/stock-availables/{unused}"), None).await, 200);
    p.assert_ledger_holds().await;
}

/// A deadlock the server did not cause (here: a session of the test's own, locking the same
/// lots the other way round) aborts the request's transaction; the server runs the request
/// again and answers as if nothing had happened.
#[tokio::test]
async fn a_request_that_loses_a_deadlock_is_run_again() {
    let p = Pharmacy::open().await;
    let north = p.app.create_branch("NORTH").await;
    let here = p.lot(p.branch, p.item, "D-1", None, 10).await;
    let there = p.lot(north, p.item, "D-1", None, 0).await;
    assert!(here < there, "the request locks `here` first");
    let mut outside = clinic_server::db::connect(&p.app.db.url).await.unwrap();
    let tx = outside.transaction().await.unwrap();
    tx.execute("SELECT 1 FROM stock_availables WHERE id = $1 FOR UPDATE", &[&there]).await.unwrap();
    let request = p.app.request(Method::POST, "/api/v1/stock-movements", None).json(
        &json!({ "branch_id": p.branch, "stock_available_id": here, "kind": "transfer_out", "quantity": "-3",
                 "reason": "Restock", "to_branch_id": north }),
    );
    let request = tokio::spawn(reply(request));
    // Once the request holds `here` and waits for `there`, take `here` the other way round.
    let watcher = clinic_server::db::connect(&p.app.db.url).await.unwrap();
    let mut waiting = false;
    for _ in 0..500 {
        let row = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(waiting, "the request never waited for the lot");
    // The request waited first, so its deadlock check runs first and it is the one aborted.
    tx.execute("SELECT 1 FROM stock_availables WHERE id = $1 FOR UPDATE", &[&here]).await.unwrap();
    tx.rollback().await.unwrap();
    let answer = request.await.unwrap();
    assert_status(&answer, 201);
    assert_eq!(p.on_hand(here).await, Decimal::from(7));
    assert_eq!(p.on_hand(there).await, Decimal::from(3));
    p.assert_ledger_holds().await;
}

/// A delivery's posting moves its order through the unit of work: the order's trail shows
/// each `receive`, its version moves, and its before and after are kept.
#[tokio::test]
async fn a_delivery_moves_its_order_as_an_audited_receive() {
    let p = Pharmacy::open().await;
    let supplier = p.supplier().await;
    let order = json!({ "branch_id": p.branch, "supplier_id": supplier,
                        "lines": [{ "pharmacy_item_id": p.item, "quantity_ordered": 10, "unit_cost": "2" }] });
    let order = id_of(&p.app.created("/api/v1/purchase-orders", None, order).await);
    assert_status(&p.app.post(&format!("/api/v1/purchase-orders/{order}/order"), None, json!({})).await, 200);
    for (lot, quantity) in [("R-1", 4), ("R-2", 6)] {
        let delivery = json!({ "branch_id": p.branch, "supplier_id": supplier, "purchase_order_id": order,
                               "lines": [{ "pharmacy_item_id": p.item, "lot_no": lot, "quantity": quantity }] });
        let delivery = id_of(&p.app.created("/api/v1/deliveries", None, delivery).await);
        assert_status(
            &p.app.post(&format!("/api/v1/deliveries/{delivery}/post"), None, json!({})).await,
            200,
        );
    }
    let trail = p.app.audit_rows("/api/v1/system-audit-logs", None, "purchase-orders", order).await;
    let actions: Vec<&str> = trail.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "order", "receive", "receive"]);
    assert_eq!(trail[2]["after"]["status"], "partially_received");
    assert_eq!(trail[3]["before"]["status"], "partially_received");
    assert_eq!(trail[3]["after"]["status"], "received");
    let now = p.app.get(&format!("/api/v1/purchase-orders/{order}"), None).await;
    assert_eq!(now.body["data"]["version"], trail[3]["after"]["version"]);
}
