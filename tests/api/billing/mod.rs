//! Billing transactions per patient: what each kind carries, exact
//! money, posting and voiding with the balance rules, gapless numbers under concurrency,
//! Idempotency-Key replays, lists, the summary and the audit trail. Over HTTP against a
//! real server and a fresh database.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::str::FromStr;

use crate::support::{
    Clinic, Reply, TestApp, assert_error, assert_invalid, assert_status, column, id_of, ids, reply, today,
};
use futures_util::future::join_all;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

mod charges;
mod limits;
mod posting;
mod reach;

const AUDIT: &str = "/api/v1/audit-logs";
/// What the branch audit trail calls billing transactions.
const AUDITED_AS: &str = "patients/{patient_id}/billing-transactions";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn transactions(patient: i64) -> String {
    format!("/api/v1/patients/{patient}/billing-transactions")
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
