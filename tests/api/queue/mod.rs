//! The service queue: numbering per service and local day under
//! concurrency, every move allowed and refused, transfers racing calls, the waiting room's
//! view, visits with their ticket, the live display and the end-of-day closer. Over HTTP
//! against a real server and a fresh database.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::sse::{self, EventStream};
use crate::support::{
    Clinic, Reply, SOON, TestApp, assert_error, assert_invalid, assert_status, id_of, reply, within,
};

mod display;
mod tickets;

/// A branch service of `branch` with `code`.
pub async fn service(app: &TestApp, branch: i64, code: &str) -> i64 {
    id_of(
        &app.created(
            &format!("/api/v1/branches/{branch}/services"),
            Some(branch),
            json!({ "name": format!("Service {code}"), "code": code }),
        )
        .await,
    )
}

pub async fn ticket(app: &TestApp, branch: i64, service: i64, body: Value) -> Value {
    app.created(&format!("/api/v1/queue/branch-services/{service}/queue"), Some(branch), body).await
}

/// A move of a ticket (`call`, `serve`, `complete`, `skip`, `no-show`, or `transfer` to
/// `to`).
pub async fn move_ticket(app: &TestApp, branch: i64, id: i64, verb: &str, to: i64) -> Reply {
    if verb == "transfer" {
        app.post(
            &format!("/api/v1/queue/queue-tickets/{id}/transfer"),
            Some(branch),
            json!({ "branch_service_id": to }),
        )
        .await
    } else {
        app.put(
            &format!("/api/v1/queue/queue-tickets/{id}/{verb}"),
            Some(branch),
            json!({ "counter": "Window 2" }),
        )
        .await
    }
}

async fn set_timezone(app: &TestApp, branch: i64, timezone: &str) {
    let r = app.put(&format!("/api/v1/branches/{branch}"), None, json!({ "timezone": timezone })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["timezone"], timezone);
}

/// Runs SQL in the branch's schema of the test database.
async fn in_branch(app: &TestApp, branch: i64, sql: &str) {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client.batch_execute(&format!("SET search_path TO branch_{branch}; {sql}")).await.unwrap();
}
