//! Authentication: login, logout, tokens, profiles, password reset and change, the
//! security rules and the authentication rate limits, one rule per test, over HTTP against a
//! real server.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::smtp::{SmtpReceiver, reset_code_in};
use crate::support::{Reply, TestApp, assert_error, assert_invalid, reply, send};
use reqwest::Method;
use serde_json::{Value, json};

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

// ---------------------------------------------------------------------------------------
// Login (rules 1, 2, 4)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn login_identifies_by_username_and_never_by_email() {
    let app = spawn_relaxed().await;
    let (id, _) = app.create_user("ursula", &["nurse"], &[]).await;
    let r = app.login_reply("ursula@example.test", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    let r = app.login_reply("ursula", USER_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["user"]["id"], id);
    assert_eq!(r.body["data"]["user"]["username"], "ursula");
    assert_eq!(r.body["data"]["user"]["email"], "ursula@example.test");
}

#[tokio::test]
async fn login_with_an_email_field_instead_of_username_does_not_log_in() {
    let app = spawn_relaxed().await;
    app.create_user("victor", &["nurse"], &[]).await;
    let r = reply(
        app.http
            .post(app.url(LOGIN))
            .json(&json!({ "email": "victor@example.test", "password": USER_PASSWORD })),
    )
    .await;
    assert!(r.body["data"]["token"].is_null(), "no token without a username: {}", r.text);
    assert_invalid(&r, &["username"]);
}

#[tokio::test]
async fn wrong_password_and_unknown_user_are_401_exactly_invalid_credentials() {
    let app = spawn_relaxed().await;
    app.create_user("wendy", &["nurse"], &[]).await;
    let tries =
        [("wendy", "wrong-password-9"), ("admin", "not-the-password"), ("nobody-at-all", USER_PASSWORD)];
    for (user, password) in tries {
        let r = app.login_reply(user, password).await;
        assert_eq!(r.status, 401, "{user}: {}", r.text);
        assert_eq!(r.body, json!({ "message": "Invalid credentials" }), "{user}");
        assert!(r.header("content-type").unwrap_or_default().starts_with("application/json"));
    }
}

#[tokio::test]
async fn an_unknown_user_costs_one_password_check_like_a_wrong_password() {
    // Timing would tell which usernames exist if an unknown one skipped the hash: each login
    // checks exactly one password, the unknown user's against a decoy of the same cost.
    let app = spawn_relaxed().await;
    app.create_user("tim", &["nurse"], &[]).await;
    for username in ["tim", "nobody-by-that-name"] {
        let before = app.state.hasher.checked();
        let r = app.login_reply(username, "wrong-password-1").await;
        assert_eq!(r.status, 401, "{}", r.text);
        assert_eq!(app.state.hasher.checked() - before, 1, "{username}");
    }
}

#[tokio::test]
async fn inactive_user_cannot_log_in() {
    let app = spawn_relaxed().await;
    let (id, _) = app.create_user("xena", &["nurse"], &[]).await;
    {
        let client = app.state.registry.get().await.unwrap();
        client.execute("UPDATE users SET active = false WHERE id = $1", &[&id]).await.unwrap();
    }
    let r = app.login_reply("xena", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
}

#[tokio::test]
async fn auth_routes_without_a_valid_token_are_401() {
    let app = spawn_relaxed().await;
    let routes = [
        (Method::GET, PROFILE),
        (Method::PUT, PROFILE),
        (Method::POST, LOGOUT),
        (Method::POST, SWITCH),
        (Method::GET, MY_BRANCHES),
        (Method::POST, CHANGE_PASSWORD),
    ];
    for (method, path) in routes {
        let r = reply(app.http.request(method.clone(), app.url(path)).json(&json!({}))).await;
        assert_error(&r, 401, "unauthenticated");
        let r = reply(app.request_as("1|not-a-token", method.clone(), path, None).json(&json!({}))).await;
        assert_error(&r, 401, "unauthenticated");
    }
}

// ---------------------------------------------------------------------------------------
// Profile
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn profile_returns_the_current_user() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::GET, PROFILE, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let data = &r.body["data"];
    assert_eq!(data["id"], app.admin_id().await);
    assert_eq!(data["username"], "admin");
    assert_eq!(data["default_branch_id"], main);
    assert!(data["name"].as_str().is_some_and(|n| !n.is_empty()), "{data}");
    assert!(data["email"].as_str().is_some_and(|e| e.contains('@')), "{data}");
    assert!(data.get("password").is_none() && data.get("password_hash").is_none(), "{data}");

    let branch = app.create_branch("PROF").await;
    let (id, token) = api_user(&app, "yusuf", "nurse", &[branch]).await;
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let data = &r.body["data"];
    assert_eq!(data["id"], id);
    assert_eq!(data["name"], "User yusuf");
    assert_eq!(data["email"], "yusuf@example.test");
    assert_eq!(data["username"], "yusuf");
    assert_eq!(data["default_branch_id"], branch);
}

#[tokio::test]
async fn profile_update_validates_and_persists() {
    let app = spawn_relaxed().await;
    let (id, token) = app.create_user("zara", &["nurse"], &[]).await;
    app.create_user("other", &["nurse"], &[]).await;
    let put = |body: Value| app.request_as(&token, Method::PUT, PROFILE, None).json(&body);

    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "not-an-email" }))).await, &["email"]);
    assert_invalid(&reply(put(json!({ "email": "zara2@example.test" }))).await, &["name"]);
    assert_invalid(&reply(put(json!({ "name": "   ", "email": "zara2@example.test" }))).await, &["name"]);
    assert_invalid(&reply(put(json!({ "name": "Zara Z" }))).await, &["email"]);
    // Another user's e-mail, in any case.
    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "other@example.test" }))).await, &["email"]);
    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "OTHER@Example.TEST" }))).await, &["email"]);
    // Nothing changed so far.
    let (_, body) = send(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(body["data"]["name"], "zara");
    assert_eq!(body["data"]["email"], "zara@example.test");

    let r = reply(put(json!({ "name": "Zara Zed", "email": "zara.zed@example.test" }))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["name"], "Zara Zed");
    assert_eq!(r.body["data"]["email"], "zara.zed@example.test");
    assert_eq!(r.body["data"]["username"], "zara", "the username is not changed by the profile");

    let (_, body) = send(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(body["data"]["name"], "Zara Zed");
    assert_eq!(body["data"]["email"], "zara.zed@example.test");
    let r = app.login_reply("zara", USER_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["user"]["name"], "Zara Zed");
    assert_eq!(r.body["data"]["user"]["email"], "zara.zed@example.test");
    // Keeping one's own e-mail is no conflict.
    let r = reply(put(json!({ "name": "Zara Zee", "email": "zara.zed@example.test" }))).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// Branches of the user, switching (rule 7)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn switch_branch_validates_checks_access_and_changes_the_default() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let east = app.create_branch("EAST").await;
    let west = app.create_branch("WEST").await;
    let (_, token) = api_user(&app, "sam", "nurse", &[main, east]).await;
    let switch = |body: Value| app.request_as(&token, Method::POST, SWITCH, None).json(&body);

    assert_invalid(&reply(switch(json!({ "branch_id": "x" }))).await, &["branch_id"]);
    assert_invalid(&reply(switch(json!({}))).await, &["branch_id"]);
    assert_invalid(&reply(switch(json!({ "branch_id": null }))).await, &["branch_id"]);

    let r = reply(switch(json!({ "branch_id": west }))).await;
    assert_eq!(r.status, 403, "a branch not granted: {}", r.text);
    let r = reply(switch(json!({ "branch_id": 987_654 }))).await;
    assert_eq!(r.status, 403, "a branch that does not exist: {}", r.text);
    let (_, body) = send(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(body["data"]["default_branch_id"], main, "refusals change nothing");

    let r = reply(switch(json!({ "branch_id": east }))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    let (_, body) = send(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(body["data"]["default_branch_id"], east);
    let r = app.login_reply("sam", USER_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["user"]["default_branch_id"], east);
    // And back.
    let r = reply(switch(json!({ "branch_id": main }))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, body) = send(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(body["data"]["default_branch_id"], main);
}

#[tokio::test]
async fn switching_to_an_archived_branch_is_403() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let old = app.create_branch("OLD").await;
    let (_, token) = api_user(&app, "tina", "nurse", &[main, old]).await;
    let r = reply(app.request(Method::DELETE, &format!("/api/v1/branches/{old}"), None)).await;
    assert_eq!(r.status, 200, "archive: {}", r.text);
    let r =
        reply(app.request_as(&token, Method::POST, SWITCH, None).json(&json!({ "branch_id": old }))).await;
    assert_eq!(r.status, 403, "{}", r.text);
}

#[tokio::test]
async fn my_branches_lists_only_granted_active_branches() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let b1 = app.create_branch("BONE").await;
    let b2 = app.create_branch("BTWO").await;
    let b3 = app.create_branch("BTHREE").await;
    let (_, token) = api_user(&app, "uma", "nurse", &[main, b1, b2]).await;

    let r = reply(app.request_as(&token, Method::GET, MY_BRANCHES, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids_of(&r.body["data"]), BTreeSet::from([main, b1, b2]), "{}", r.text);
    let one = r.body["data"].as_array().unwrap().iter().find(|b| b["id"] == b1).unwrap();
    assert_eq!(one["code"], "BONE");
    assert_eq!(one["name"], "Branch BONE");
    assert!(!ids_of(&r.body["data"]).contains(&b3));

    let r = reply(app.request(Method::DELETE, &format!("/api/v1/branches/{b2}"), None)).await;
    assert_eq!(r.status, 200, "archive: {}", r.text);
    let r = reply(app.request_as(&token, Method::GET, MY_BRANCHES, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids_of(&r.body["data"]), BTreeSet::from([main, b1]), "archived branch left: {}", r.text);
    let r = app.login_reply("uma", USER_PASSWORD).await;
    assert_eq!(ids_of(&r.body["data"]["branches"]), BTreeSet::from([main, b1]), "{}", r.text);
    // The admin's list too.
    let r = reply(app.request(Method::GET, MY_BRANCHES, None)).await;
    assert!(!ids_of(&r.body["data"]).contains(&b2), "{}", r.text);
    assert!(ids_of(&r.body["data"]).contains(&b3), "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// Tokens (rule 3, logout, DESIGN security)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn logout_revokes_only_the_presented_token() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let (_, first) = app.create_user("lou", &["nurse"], &[main]).await;
    let second = app.login("lou", USER_PASSWORD).await;
    // Both are cached as valid before the logout, on an auth route and on a branch route.
    for token in [&first, &second] {
        assert_eq!(status_of(&app, token).await, 200);
        let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }

    let r = reply(app.request_as(&first, Method::POST, LOGOUT, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);

    let r = reply(app.request_as(&first, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&first, Method::GET, PATIENTS, Some(main))).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&first, Method::POST, LOGOUT, None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_eq!(status_of(&app, &second).await, 200, "the user's other token still works");
    let r = reply(app.request_as(&second, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "the user's other token still works in a branch: {}", r.text);
    assert_eq!(status_of(&app, &app.admin_token).await, 200, "other users are untouched");
    let r = app.get(PATIENTS, Some(main)).await;
    assert_eq!(r.status, 200, "other users are untouched in a branch: {}", r.text);
    let (first_id, _) = first.split_once('|').unwrap();
    let client = app.state.registry.get().await.unwrap();
    let left: i64 = client
        .query_one("SELECT count(*) FROM api_tokens WHERE id = $1", &[&first_id.parse::<i64>().unwrap()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the revoked token is gone from the registry");
}

#[tokio::test]
async fn tokens_have_no_expiry_by_default() {
    let app = spawn_relaxed().await;
    let (id, _) = app.admin_token.split_once('|').unwrap();
    let client = app.state.registry.get().await.unwrap();
    let expires: Option<time::OffsetDateTime> = client
        .query_one("SELECT expires_at FROM api_tokens WHERE id = $1", &[&id.parse::<i64>().unwrap()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(expires, None);
}

#[tokio::test]
async fn tokens_expire_after_the_configured_expiry() {
    // Thirty minutes (the setting is in minutes); the token's row is then aged past them.
    let app = TestApp::spawn_with(|s| s.token_expiry = Some(Duration::from_secs(30 * 60))).await;
    let main = app.main_branch().await;
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    let id: i64 = token.split_once('|').unwrap().0.parse().unwrap();
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.status, 200, "a fresh token works: {}", r.text);
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "a fresh token works in a branch: {}", r.text);
    {
        let client = app.state.registry.get().await.unwrap();
        let seconds: f64 = client
            .query_one(
                "SELECT EXTRACT(EPOCH FROM expires_at - created_at)::float8 FROM api_tokens WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0);
        assert!((1798.0..=1802.0).contains(&seconds), "token lifetime {seconds} s, expected 1800 s");
        // Issued thirty minutes and a second ago.
        client
            .execute(
                "UPDATE api_tokens SET created_at = created_at - interval '1801 seconds',
                        expires_at = expires_at - interval '1801 seconds'
                  WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
    }
    // The cached record goes, as after any change to the row (or once the cache's own time
    // limit is over).
    app.state.forget(&[clinic_server::notify::Topic::Token(id)]).await;
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await;
    assert_error(&r, 401, "unauthenticated");
    assert_eq!(status_of(&app, &app.admin_token).await, 200, "another token keeps its own expiry");
}

#[tokio::test]
async fn tokens_are_stored_as_sha256_of_the_secret_only() {
    let app = spawn_relaxed().await;
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    let (id, secret) = token.split_once('|').expect("token is <id>|<secret>");
    let id: i64 = id.parse().expect("token id is an integer");
    assert!(secret.len() >= 43, "secret too short for 256 bits: {secret}");
    let client = app.state.registry.get().await.unwrap();
    let stored: Vec<String> = client
        .query("SELECT encode(secret_hash, 'hex') FROM api_tokens", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!stored.is_empty());
    for hash in &stored {
        assert_ne!(hash, secret, "a raw secret is stored");
        assert!(!hash.contains(secret), "a raw secret is stored");
    }
    let leaked: i64 = client
        .query_one(
            "SELECT count(*) FROM api_tokens t WHERE strpos(row_to_json(t)::text, $1) > 0
                OR strpos(encode(t.secret_hash, 'escape'), $1) > 0",
            &[&secret],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaked, 0, "the raw secret appears in api_tokens");
    let matches: bool = client
        .query_one(
            "SELECT secret_hash = sha256(convert_to($2, 'UTF8')) FROM api_tokens WHERE id = $1",
            &[&id, &secret],
        )
        .await
        .unwrap()
        .get(0);
    assert!(matches, "the stored hash is not SHA-256 of the secret");
}

#[tokio::test]
async fn passwords_are_stored_as_argon2id_phc_strings() {
    let app = spawn_relaxed().await;
    app.create_user("pia", &["nurse"], &[]).await;
    let client = app.state.registry.get().await.unwrap();
    for (user, password) in [("admin", crate::support::ADMIN_PASSWORD), ("pia", USER_PASSWORD)] {
        let hash: String = client
            .query_one("SELECT password_hash FROM users WHERE username = $1", &[&user])
            .await
            .unwrap()
            .get(0);
        assert!(hash.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{user}: {hash}");
        assert!(!hash.contains(password), "{user}: the password is stored");
    }
}

// ---------------------------------------------------------------------------------------
// Password reset by code (file mail drop)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn reset_code_answers_alike_for_known_and_unknown_emails_and_validates_the_email() {
    let dir = TempDir::new();
    let var = dir.0.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.var_dir = var;
    })
    .await;
    app.create_user("rita", &["nurse"], &[]).await;
    let known = post_public(&app, RESET_CODE, json!({ "email": "rita@example.test" })).await;
    assert_eq!(known.status, 200, "{}", known.text);
    assert!(known.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", known.text);
    let unknown = post_public(&app, RESET_CODE, json!({ "email": "nobody@example.test" })).await;
    assert_eq!(unknown.status, 200, "{}", unknown.text);
    assert_eq!(unknown.body, known.body, "known and unknown addresses must be indistinguishable");

    assert_invalid(&post_public(&app, RESET_CODE, json!({ "email": "not-an-email" })).await, &["email"]);
    assert_invalid(&post_public(&app, RESET_CODE, json!({})).await, &["email"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "not-an-email", "code": "123456" })).await;
    assert_invalid(&r, &["email"]);
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({
            "email": "not-an-email",
            "code": "123456",
            "password": "long-enough-1",
            "password_confirmation": "long-enough-1",
        }),
    )
    .await;
    assert_invalid(&r, &["email"]);

    let mut seen = HashSet::new();
    let (mail, code) = next_mail(&dir.0, &mut seen).await;
    assert!(mail.contains("rita@example.test"), "mail not addressed to the user: {mail}");
    assert_eq!(code.len(), 6);
    // Only the known address gets a mail: the next one to arrive is the one asked for last.
    let r = post_public(&app, RESET_CODE, json!({ "email": "rita@example.test" })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (mail, _) = next_mail(&dir.0, &mut seen).await;
    assert!(mail.contains("rita@example.test"), "a mail for an unknown address: {mail}");
    assert_eq!(eml_count(&dir.0), 2, "only the known address gets a mail");
}

#[tokio::test]
async fn reset_codes_are_stored_hashed_and_live_15_minutes() {
    let dir = TempDir::new();
    let var = dir.0.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.var_dir = var;
    })
    .await;
    let (id, _) = app.create_user("hana", &["nurse"], &[]).await;
    let r = post_public(&app, RESET_CODE, json!({ "email": "hana@example.test" })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, code) = next_mail(&dir.0, &mut HashSet::new()).await;
    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT encode(code_hash, 'hex'), encode(code_hash, 'escape'),
                    EXTRACT(EPOCH FROM expires_at - now())::float8
               FROM password_reset_codes WHERE user_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let hex: String = row.get(0);
    let raw: String = row.get(1);
    let lifetime: f64 = row.get(2);
    assert_ne!(raw, code, "the code is stored as typed");
    assert!(!raw.contains(&code) && !hex.contains(&code), "the code is stored as typed");
    assert!((14.0 * 60.0..=15.0 * 60.0 + 5.0).contains(&lifetime), "code lifetime {lifetime} s");
    // Past its lifetime the right code no longer works.
    client
        .execute(
            "UPDATE password_reset_codes SET expires_at = now() - interval '1 second' WHERE user_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "hana@example.test", "code": code })).await;
    assert_invalid(&r, &["code"]);
}

#[tokio::test]
async fn password_reset_full_flow() {
    let dir = TempDir::new();
    let var = dir.0.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.var_dir = var;
    })
    .await;
    let (_, before1) = app.create_user("rosa", &["nurse"], &[]).await;
    let before2 = app.login("rosa", USER_PASSWORD).await;
    let email = "rosa@example.test";

    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, code) = next_mail(&dir.0, &mut HashSet::new()).await;

    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "someone@example.test", "code": code })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    // Verifying does not use the code up.
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let new_password = "brand-new-password-7";
    let reset = |code: &str, password: &str, confirmation: &str| json!({ "email": email, "code": code, "password": password, "password_confirmation": confirmation });
    let r = post_public(&app, RESET_PASSWORD, reset(&code, new_password, "something-else-1")).await;
    assert_invalid(&r, &["password"]);
    let r = post_public(&app, RESET_PASSWORD, reset(&code, "short", "short")).await;
    assert_invalid(&r, &["password"]);
    // Refusals changed nothing: the old password and tokens still work.
    assert_eq!(status_of(&app, &before1).await, 200);
    assert_eq!(app.login_reply("rosa", USER_PASSWORD).await.status, 200);

    let r = post_public(&app, RESET_PASSWORD, reset(&code, new_password, new_password)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);

    let r = app.login_reply("rosa", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "the old password still logs in: {}", r.text);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    let r = app.login_reply("rosa", new_password).await;
    assert_eq!(r.status, 200, "the new password does not log in: {}", r.text);
    let after = r.body["data"]["token"].as_str().unwrap().to_owned();
    for token in [&before1, &before2] {
        let r = reply(app.request_as(token, Method::GET, PROFILE, None)).await;
        assert_error(&r, 401, "unauthenticated");
    }
    assert_eq!(status_of(&app, &after).await, 200);
    assert_eq!(status_of(&app, &app.admin_token).await, 200, "other users keep their sessions");

    // Single use.
    let r = post_public(&app, RESET_PASSWORD, reset(&code, "third-password-3", "third-password-3")).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_invalid(&r, &["code"]);
    assert_eq!(app.login_reply("rosa", new_password).await.status, 200);
}

#[tokio::test]
async fn a_new_reset_code_replaces_the_old_one() {
    let dir = TempDir::new();
    let var = dir.0.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.var_dir = var;
    })
    .await;
    app.create_user("nora", &["nurse"], &[]).await;
    let email = "nora@example.test";
    let mut seen = HashSet::new();
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, old) = next_mail(&dir.0, &mut seen).await;
    let new = loop {
        let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let (_, code) = next_mail(&dir.0, &mut seen).await;
        if code != old {
            break code;
        }
    };
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": old })).await;
    assert_invalid(&r, &["code"]);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": new })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let password = "replaced-password-5";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": old, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_invalid(&r, &["code"]);
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": new, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(app.login_reply("nora", password).await.status, 200);
}

#[tokio::test]
async fn five_wrong_tries_burn_the_code() {
    let dir = TempDir::new();
    let var = dir.0.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.var_dir = var;
    })
    .await;
    app.create_user("bruno", &["nurse"], &[]).await;
    let email = "bruno@example.test";
    let mut seen = HashSet::new();

    // Four wrong tries leave the code usable.
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (_, code) = next_mail(&dir.0, &mut seen).await;
    for i in 1..=4 {
        let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
        assert_eq!(r.status, 422, "wrong try {i}: {}", r.text);
    }
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_eq!(r.status, 200, "after four wrong tries: {}", r.text);

    // A fresh code, five wrong tries: burnt.
    let code = loop {
        let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let (_, fresh) = next_mail(&dir.0, &mut seen).await;
        if fresh != code {
            break fresh;
        }
    };
    for i in 1..=5 {
        let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": wrong_code(&code) })).await;
        assert_invalid(&r, &["code"]);
        assert_eq!(r.status, 422, "wrong try {i}");
    }
    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_invalid(&r, &["code"]);
    let password = "burnt-code-password";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": code, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_invalid(&r, &["code"]);
    assert_eq!(app.login_reply("bruno", USER_PASSWORD).await.status, 200, "the password is unchanged");
    assert_eq!(app.login_reply("bruno", password).await.status, 401);
}

// ---------------------------------------------------------------------------------------
// Password reset through a real SMTP server
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn password_reset_through_an_smtp_server() {
    let smtp = SmtpReceiver::start().await;
    let url = smtp.url.clone();
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.smtp_url = Some(url);
    })
    .await;
    let (_, before) = app.create_user("sofia", &["nurse"], &[]).await;
    let email = "sofia@example.test";
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mail = smtp.wait_for(1).await.remove(0);
    assert_eq!(mail.recipients, vec![email.to_owned()], "recipient");
    assert!(mail.sender.contains('@'), "envelope sender {:?}", mail.sender);
    assert!(mail.text.contains("Subject:"), "{}", mail.text);
    let code = reset_code_in(&mail.text).unwrap_or_else(|| panic!("no code in the message: {}", mail.text));

    let r = post_public(&app, VERIFY_CODE, json!({ "email": email, "code": code })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let password = "smtp-reset-password-2";
    let r = post_public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": code, "password": password, "password_confirmation": password }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(app.login_reply("sofia", password).await.status, 200);
    assert_eq!(app.login_reply("sofia", USER_PASSWORD).await.status, 401);
    let r = reply(app.request_as(&before, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    // An unknown address sends nothing: the next mail to arrive is the one asked for after it.
    let r = post_public(&app, RESET_CODE, json!({ "email": "ghost@example.test" })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = post_public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mails = smtp.wait_for(2).await;
    assert_eq!(mails.len(), 2, "a message was sent for an unknown address: {mails:?}");
    assert_eq!(mails[1].recipients, vec![email.to_owned()], "a message was sent for an unknown address");
}

// ---------------------------------------------------------------------------------------
// Change password
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn change_password_validates_and_ends_other_sessions_only() {
    let app = spawn_relaxed().await;
    let (_, current) = app.create_user("carl", &["nurse"], &[]).await;
    let other = app.login("carl", USER_PASSWORD).await;
    let new_password = "changed-password-4";
    let change = |current_password: &str, password: &str, confirmation: &str| {
        app.request_as(&current, Method::POST, CHANGE_PASSWORD, None).json(&json!({
            "current_password": current_password,
            "password": password,
            "password_confirmation": confirmation,
        }))
    };
    assert_invalid(
        &reply(change("not-my-password", new_password, new_password)).await,
        &["current_password"],
    );
    assert_invalid(&reply(change(USER_PASSWORD, new_password, "different-password")).await, &["password"]);
    assert_invalid(&reply(change(USER_PASSWORD, "short", "short")).await, &["password"]);
    assert_eq!(status_of(&app, &other).await, 200, "refusals end no session");
    assert_eq!(app.login_reply("carl", USER_PASSWORD).await.status, 200, "refusals change nothing");

    let r = reply(change(USER_PASSWORD, new_password, new_password)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    assert_eq!(status_of(&app, &current).await, 200, "the current token goes on");
    let r = reply(app.request_as(&other, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_eq!(app.login_reply("carl", new_password).await.status, 200);
    let r = app.login_reply("carl", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(status_of(&app, &app.admin_token).await, 200, "other users keep their sessions");
}

// ---------------------------------------------------------------------------------------
// Rate limits at their default values
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn sixth_login_a_minute_from_one_ip_is_429() {
    // The harness logged in once: that is the first of five.
    let app = TestApp::spawn().await;
    for i in 2..=5u32 {
        let password = if i % 2 == 0 { "wrong-password-1" } else { crate::support::ADMIN_PASSWORD };
        let r = app.login_reply("admin", password).await;
        assert_eq!(r.status, if i % 2 == 0 { 401 } else { 200 }, "login {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"), "login {i}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some((5 - i).to_string().as_str()), "login {i}");
    }
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_rate_limited(&r, 5);
    assert!(r.body["data"].is_null(), "no token past the limit: {}", r.text);
    // The authenticated API is not limited by it.
    assert_eq!(status_of(&app, &app.admin_token).await, 200);
}

#[tokio::test]
async fn password_reset_routes_share_one_bucket_per_ip() {
    let app = TestApp::spawn().await;
    for i in 1..=3u32 {
        let r = post_public(&app, RESET_CODE, json!({ "email": format!("ghost{i}@example.test") })).await;
        assert_eq!(r.status, 200, "reset-code {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(r.header("x-ratelimit-remaining"), Some((5 - i).to_string().as_str()));
    }
    for _ in 0..2 {
        let r =
            post_public(&app, VERIFY_CODE, json!({ "email": "ghost1@example.test", "code": "123456" })).await;
        assert_invalid(&r, &["code"]);
    }
    let body = json!({
        "email": "ghost1@example.test",
        "code": "123456",
        "password": "whatever-password",
        "password_confirmation": "whatever-password",
    });
    let r = post_public(&app, RESET_PASSWORD, body).await;
    assert_rate_limited(&r, 5);
    assert_rate_limited(&post_public(&app, RESET_CODE, json!({ "email": "ghost9@example.test" })).await, 5);
    let r = post_public(&app, VERIFY_CODE, json!({ "email": "ghost1@example.test", "code": "123456" })).await;
    assert_rate_limited(&r, 5);
    // Logging in has its own bucket.
    assert_eq!(app.login_reply("admin", crate::support::ADMIN_PASSWORD).await.status, 200);
}

#[tokio::test]
async fn change_password_is_limited_per_user() {
    let app = TestApp::spawn().await;
    let (_, alice) = app.create_user("alice", &["nurse"], &[]).await;
    let (_, bob) = app.create_user("bob", &["nurse"], &[]).await;
    let change = |token: &str, current: &str| {
        app.request_as(token, Method::POST, CHANGE_PASSWORD, None).json(&json!({
            "current_password": current,
            "password": "next-password-1",
            "password_confirmation": "next-password-1",
        }))
    };
    for i in 1..=5 {
        let r = reply(change(&alice, "not-the-password")).await;
        assert_invalid(&r, &["current_password"]);
        assert_eq!(r.status, 422, "try {i}");
    }
    let r = reply(change(&alice, USER_PASSWORD)).await;
    assert_rate_limited(&r, 5);
    assert_eq!(app.login_reply("alice", USER_PASSWORD).await.status, 200, "the 429 changed nothing");
    // Another user is not limited by alice's tries.
    let r = reply(change(&bob, USER_PASSWORD)).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn login_limit_counts_the_forwarded_address_behind_a_trusted_proxy() {
    let app = TestApp::spawn_with(|s| {
        s.trusted_proxies = vec![clinic_server::config::Cidr::parse("127.0.0.1").unwrap()];
    })
    .await;
    let from = |ip: &str| {
        app.http
            .post(app.url(LOGIN))
            .header("x-forwarded-for", ip)
            .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD }))
    };
    for i in 1..=5 {
        let r = reply(from("10.0.0.1")).await;
        assert_eq!(r.status, 200, "login {i} from 10.0.0.1: {}", r.text);
    }
    assert_rate_limited(&reply(from("10.0.0.1")).await, 5);
    // The proxy appends the address it saw: whatever the client put before it is not believed.
    assert_rate_limited(&reply(from("10.0.0.77, 10.0.0.1")).await, 5);
    let r = reply(from("10.0.0.2")).await;
    assert_eq!(r.status, 200, "another client behind the proxy: {}", r.text);
}

#[tokio::test]
async fn forwarded_for_is_ignored_without_trusted_proxies() {
    let app = TestApp::spawn().await;
    for i in 2..=5 {
        let r = reply(
            app.http
                .post(app.url(LOGIN))
                .header("x-forwarded-for", format!("10.0.0.{i}"))
                .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD })),
        )
        .await;
        assert_eq!(r.status, 200, "login {i}: {}", r.text);
    }
    let r = reply(
        app.http
            .post(app.url(LOGIN))
            .header("x-forwarded-for", "10.0.0.99")
            .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD })),
    )
    .await;
    assert_rate_limited(&r, 5);
}

#[tokio::test]
async fn profile_and_branch_routes_count_toward_the_general_api_limit() {
    let app = TestApp::spawn().await;
    for i in 1..=7 {
        let r = reply(app.request(Method::GET, PROFILE, None)).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("1000"), "request {i}");
    }
    let r = reply(app.request(Method::GET, MY_BRANCHES, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-ratelimit-limit"), Some("1000"));
}

#[tokio::test]
async fn nul_bytes_in_login_and_reset_bodies_are_422_not_500() {
    let app = TestApp::spawn().await;
    let r = reply(
        app.http
            .post(app.url("/api/v1/auth/login"))
            .json(&json!({ "username": "ad\u{0}min", "password": "x" })),
    )
    .await;
    assert_invalid(&r, &["username"]);
    let r = reply(
        app.http.post(app.url("/api/v1/auth/reset-code")).json(&json!({ "email": "a\u{0}@example.test" })),
    )
    .await;
    assert_invalid(&r, &["email"]);
}
