//! Authentication: login, logout, tokens, profiles, password reset and change, the
//! security rules and the authentication rate limits, one rule per test, over HTTP against a
//! real server.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::mail::{MailDrop, spawn_with_smtp};
use crate::support::smtp::reset_code_in;
use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, reply};
use reqwest::Method;
use serde_json::{Value, json};

mod limits;
mod login;
mod reset;

const LOGIN: &str = "/api/v1/auth/login";
const PATIENTS: &str = "/api/v1/patients";
const LOGOUT: &str = "/api/v1/auth/logout";
const PROFILE: &str = "/api/v1/auth/profile";
const SWITCH: &str = "/api/v1/auth/switch-branch";
const MY_BRANCHES: &str = "/api/v1/auth/branches";
const RESET_CODE: &str = "/api/v1/auth/reset-code";
const VERIFY_CODE: &str = "/api/v1/auth/verify-code";
const RESET_PASSWORD: &str = "/api/v1/auth/reset-password";
const CHANGE_PASSWORD: &str = "/api/v1/profile/change-password";
const USER_PASSWORD: &str = "user-password-1";

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A 429: message, `Retry-After` and the `X-RateLimit-*` headers.
#[track_caller]
fn assert_rate_limited(r: &Reply, limit: u32) {
    assert_error(r, 429, "rate_limited");
    let retry_after: u64 = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", r.headers))
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(r.header("x-ratelimit-limit"), Some(limit.to_string().as_str()), "{:?}", r.headers);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"), "{:?}", r.headers);
}

/// A server whose login and password-reset limits do not get in the way of a test that is
/// about something else.
async fn spawn_relaxed() -> TestApp {
    TestApp::spawn_with(relax).await
}

fn relax(s: &mut clinic_server::config::Settings) {
    s.rate_limit_login = 1000;
    s.rate_limit_auth = 1000;
}

async fn post_public(app: &TestApp, path: &str, body: Value) -> Reply {
    reply(app.http.post(app.url(path)).header("accept", "application/json").json(&body)).await
}

/// A user made through `POST /users` (so they have a default branch); returns (id, token).
async fn api_user(app: &TestApp, username: &str, role: &str, branches: &[i64]) -> (i64, String) {
    let role_id: i64 = {
        let client = app.state.registry.get().await.unwrap();
        client.query_one("SELECT id FROM roles WHERE name = $1", &[&role]).await.unwrap().get(0)
    };
    let r = reply(app.request(Method::POST, "/api/v1/users", None).json(&json!({
        "name": format!("User {username}"),
        "email": format!("{username}@example.test"),
        "username": username,
        "password": USER_PASSWORD,
        "role_ids": [role_id],
        "branch_ids": branches,
    })))
    .await;
    assert_status(&r, 201);
    let id = r.body["data"]["id"].as_i64().unwrap();
    (id, app.login(username, USER_PASSWORD).await)
}

fn ids_of(list: &Value) -> BTreeSet<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|b| b["id"].as_i64().unwrap_or_else(|| panic!("no id in {b}")))
        .collect()
}

/// Some other 6-digit code.
fn wrong_code(code: &str) -> String {
    let n: u32 = code.parse().unwrap();
    format!("{:06}", (n + 1) % 1_000_000)
}
