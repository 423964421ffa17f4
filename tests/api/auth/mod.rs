//! Authentication: login, logout, tokens, profiles, password reset and change, the
//! security rules and the authentication rate limits, one rule per test, over HTTP against a
//! real server.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::smtp::{SmtpReceiver, reset_code_in};
use crate::support::{Reply, TestApp, assert_error, assert_invalid, reply, send};
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
    let (status, body) = send(app.request(Method::POST, "/api/v1/users", None).json(&json!({
        "name": format!("User {username}"),
        "email": format!("{username}@example.test"),
        "username": username,
        "password": USER_PASSWORD,
        "role_ids": [role_id],
        "branch_ids": branches,
    })))
    .await;
    assert_eq!(status, 201, "create user {username}: {body}");
    let id = body["data"]["id"].as_i64().unwrap();
    (id, app.login(username, USER_PASSWORD).await)
}

fn ids_of(list: &Value) -> BTreeSet<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|b| b["id"].as_i64().unwrap_or_else(|| panic!("no id in {b}")))
        .collect()
}

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir()
            .join(format!("clinic-auth-test-{}", &clinic_server::security::tokens::random_secret()[..16]));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits (up to 10 s) for a mail file in `<var_dir>/mail` not in `seen`, holding a code;
/// returns (file text, code).
async fn next_mail(var_dir: &Path, seen: &mut HashSet<PathBuf>) -> (String, String) {
    let dir = var_dir.join("mail");
    let started = std::time::Instant::now();
    loop {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut fresh: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "eml") && !seen.contains(p))
                .collect();
            fresh.sort();
            if let Some(path) = fresh.first() {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                if let Some(code) = reset_code_in(&text) {
                    seen.insert(path.clone());
                    return (text, code);
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no reset mail appeared in {} within 10 s",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn eml_count(var_dir: &Path) -> usize {
    std::fs::read_dir(var_dir.join("mail"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "eml"))
                .count()
        })
        .unwrap_or(0)
}

/// Some other 6-digit code.
fn wrong_code(code: &str) -> String {
    let n: u32 = code.parse().unwrap();
    format!("{:06}", (n + 1) % 1_000_000)
}

async fn status_of(app: &TestApp, token: &str) -> u16 {
    reply(app.request_as(token, Method::GET, PROFILE, None)).await.status
}
