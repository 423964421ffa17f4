//! Attacks tried from outside, each against the real server and PostgreSQL: account takeover
//! through look-alike addresses and code guessing, silent e-mail changes, one branch starving
//! the others, wildcards smuggled through normalisation, audit gaps, token probing, references
//! checked on the transaction's connection, branch hosts and schemas, weak passwords and
//! CORS. (The cache race and the rate limiter's bound are unit tests of `src/cache.rs` and
//! `src/http/rate_limit.rs`.)
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::mail::spawn_with_smtp;
use crate::support::smtp::{SmtpReceiver, reset_code_in};
use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, reply};

mod accounts;
mod audit;
mod fair_share;
mod hosts_and_cors;

const RESET_CODE: &str = "/api/v1/auth/reset-code";
const VERIFY_CODE: &str = "/api/v1/auth/verify-code";
const RESET_PASSWORD: &str = "/api/v1/auth/reset-password";
const SYSTEM_AUDIT: &str = "/api/v1/system-audit-logs";

/// A server whose mail goes to a real SMTP receiver, with the per-address limits out of the
/// way of tests that are not about them.
async fn with_mail(configure: impl FnOnce(&mut clinic_server::config::Settings)) -> (TestApp, SmtpReceiver) {
    spawn_with_smtp(|s| {
        s.rate_limit_auth = 10_000;
        s.rate_limit_login = 10_000;
        configure(s);
    })
    .await
}

async fn public(app: &TestApp, path: &str, body: Value) -> Reply {
    reply(app.http.post(app.url(path)).json(&body)).await
}

/// A user through the API (so that the registry holds it as administration makes it).
async fn user(app: &TestApp, username: &str, email: &str) -> i64 {
    let branch = app.main_branch().await;
    id_of(
        &app.created(
            "/api/v1/users",
            None,
            json!({ "name": format!("User {username}"), "email": email, "username": username,
                    "password": "a-long-password-9", "role_ids": [2], "branch_ids": [branch] }),
        )
        .await,
    )
}

async fn reset_codes_of(app: &TestApp, user: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM password_reset_codes WHERE user_id = $1", &[&user])
        .await
        .unwrap()
        .get(0)
}

/// The code in a reset mail ("... reset code is NNNNNN").
fn code_in(text: &str) -> String {
    reset_code_in(text).unwrap_or_else(|| panic!("no reset code in the mail: {text}"))
}

fn other_code(code: &str) -> String {
    format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
}
