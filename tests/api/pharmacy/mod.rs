//! Pharmacy and inventory: the stock ledger and its levels,
//! no overselling under concurrency, FEFO, receiving against purchase orders, voids,
//! transfers, gapless numbers, branch reach, the allergy check and `clinic-server stock check`. Over HTTP
//! against a real server and a fresh database.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::str::FromStr;

use futures_util::future::join_all;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, ids, reply};

mod allergies;
mod ledger;
mod limits;
mod orders;

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
