//! The admin routes (permission `admin.access`) and the decisions on roles,
//! branches, branch services, staff and users, over HTTP against a real server.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::BTreeSet;

use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, reply};
use reqwest::Method;
use serde_json::{Value, json};

mod branches;
mod last_admin;
mod roles;
mod users;

const BRANCHES: &str = "/api/v1/branches";
const ROLES: &str = "/api/v1/roles";
const USERS: &str = "/api/v1/users";
const PERMISSIONS: &str = "/api/v1/permissions";
const PATIENTS: &str = "/api/v1/patients";
const USER_PASSWORD: &str = "user-password-1";
const DEFAULT_ROLES: [&str; 6] = ["admin", "cashier", "doctor", "nurse", "pharmacist", "receptionist"];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

#[track_caller]
fn assert_message(r: &Reply) {
    assert!(r.body["message"].as_str().is_some_and(|m| !m.trim().is_empty()), "no message: {}", r.text);
}

/// Admin tests log in often; the login limit is not what they are about.
async fn spawn() -> TestApp {
    TestApp::spawn_with(|s| s.rate_limit_login = 1000).await
}

async fn role_id(app: &TestApp, name: &str) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    client.query_one("SELECT id FROM roles WHERE name = $1", &[&name]).await.unwrap().get(0)
}

fn ids(list: &Value) -> BTreeSet<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v["id"].as_i64().unwrap_or_else(|| panic!("no id in {v}")))
        .collect()
}

fn int_list(v: &Value) -> Vec<i64> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(|x| x.as_i64().unwrap()).collect()
}

/// No key of `value`, at any depth, mentions a password.
#[track_caller]
fn assert_no_password_fields(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                assert!(!key.contains("password"), "a password field is shown: {key} in {value}");
                assert_no_password_fields(inner);
            }
        }
        Value::Array(items) => items.iter().for_each(assert_no_password_fields),
        _ => {}
    }
}

/// Creates a branch service; returns its id.
async fn new_service(app: &TestApp, branch: i64, name: &str, code: &str) -> i64 {
    let r =
        app.post(&format!("{BRANCHES}/{branch}/services"), None, json!({ "name": name, "code": code })).await;
    assert_status(&r, 201); // create service
    id_of(&r)
}
