//! Attacks tried from outside, each against the real server and PostgreSQL: account takeover
//! through look-alike addresses and code guessing, silent e-mail changes, one branch starving
//! the others, wildcards smuggled through normalisation, audit gaps, token probing, references
//! checked on the transaction's connection, branch hosts and schemas, weak passwords and
//! CORS. (The cache race and the rate limiter's bound are unit tests of `src/cache.rs` and
//! `src/http/rate_limit.rs`.)

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::smtp::{SmtpReceiver, reset_code_in};
use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, id_of, reply};

const RESET_CODE: &str = "/api/v1/auth/reset-code";
const VERIFY_CODE: &str = "/api/v1/auth/verify-code";
const RESET_PASSWORD: &str = "/api/v1/auth/reset-password";
const SYSTEM_AUDIT: &str = "/api/v1/system-audit-logs";

/// A server whose mail goes to a real SMTP receiver, with the per-address limits out of the
/// way of tests that are not about them.
async fn with_mail(configure: impl FnOnce(&mut clinic_server::config::Settings)) -> (TestApp, SmtpReceiver) {
    let smtp = SmtpReceiver::start().await;
    let url = smtp.url.clone();
    let app = TestApp::spawn_with(move |s| {
        s.smtp_url = Some(url);
        s.rate_limit_auth = 10_000;
        s.rate_limit_login = 10_000;
        configure(s);
    })
    .await;
    (app, smtp)
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

// ---------------------------------------------------------------------------------------
// 1. Reset codes go only to stored addresses; look-alikes match nothing
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn look_alike_addresses_get_no_reset_code_and_genuine_ones_mail_the_stored_address() {
    let (app, smtp) = with_mail(|_| {}).await;
    let kim = user(&app, "kim", "kim@clinic.test").await;
    // KELVIN SIGN and a dotted capital I fold to "k" and "i" under lower().
    let unknown = public(&app, RESET_CODE, json!({ "email": "zed@cl\u{130}nic.test" })).await;
    for look_alike in ["\u{212A}im@clinic.test", "kim@cl\u{130}nic.test"] {
        let r = public(&app, RESET_CODE, json!({ "email": look_alike })).await;
        assert_eq!((r.status, &r.body), (unknown.status, &unknown.body), "{look_alike}");
    }
    assert_eq!(reset_codes_of(&app, kim).await, 0, "a look-alike issued a code");

    let r = public(&app, RESET_CODE, json!({ "email": "KIM@Clinic.Test" })).await;
    assert_eq!((r.status, &r.body), (unknown.status, &unknown.body), "known and unknown answer alike");
    let mails = smtp.wait_for(1).await;
    assert_eq!(mails.len(), 1, "{mails:?}");
    assert_eq!(mails[0].recipients, ["kim@clinic.test"], "mail goes to the stored address only");
    assert_eq!(reset_codes_of(&app, kim).await, 1);
}

// ---------------------------------------------------------------------------------------
// 2. Wrong codes count per account across codes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn ten_wrong_codes_an_hour_lock_every_reset_step_even_with_the_right_code() {
    let (app, smtp) = with_mail(|_| {}).await;
    let lena = user(&app, "lena", "lena@clinic.test").await;
    let email = "lena@clinic.test";
    let mut mails = 0;
    let mut fresh_code = || {
        mails += 1;
        let (app, smtp, wanted) = (&app, &smtp, mails);
        async move {
            assert_status(&public(app, RESET_CODE, json!({ "email": email })).await, 200);
            code_in(&smtp.wait_for(wanted).await[wanted - 1].text)
        }
    };
    // Nine wrong guesses spread over two codes (a new code does not reset the count).
    let first = fresh_code().await;
    for _ in 0..5 {
        let r = public(&app, VERIFY_CODE, json!({ "email": email, "code": other_code(&first) })).await;
        assert_invalid(&r, &["code"]);
    }
    let second = fresh_code().await;
    for _ in 0..4 {
        let r = public(&app, VERIFY_CODE, json!({ "email": email, "code": other_code(&second) })).await;
        assert_invalid(&r, &["code"]);
    }
    // The right code still works before the tenth wrong one...
    assert_status(&public(&app, VERIFY_CODE, json!({ "email": email, "code": second })).await, 200);
    let r = public(&app, VERIFY_CODE, json!({ "email": email, "code": other_code(&second) })).await;
    assert_invalid(&r, &["code"]);
    // ...and not after it, for verifying or resetting, as for any wrong code.
    let refused = public(&app, VERIFY_CODE, json!({ "email": email, "code": second })).await;
    assert_invalid(&refused, &["code"]);
    let wrong_elsewhere =
        public(&app, VERIFY_CODE, json!({ "email": "nobody@clinic.test", "code": second })).await;
    assert_eq!(refused.body, wrong_elsewhere.body, "a locked account answers like an unknown address");
    let r = public(
        &app,
        RESET_PASSWORD,
        json!({ "email": email, "code": second, "password": "taken-over-pw-1", "password_confirmation": "taken-over-pw-1" }),
    )
    .await;
    assert_invalid(&r, &["code"]);
    // A new code is not even issued, with the usual answer.
    let before = reset_codes_of(&app, lena).await;
    let r = public(&app, RESET_CODE, json!({ "email": email })).await;
    assert_status(&r, 200);
    assert_eq!(reset_codes_of(&app, lena).await, before);
    assert!(!app.login("lena", "a-long-password-9").await.is_empty(), "the password is unchanged");
}

// ---------------------------------------------------------------------------------------
// 3. An e-mail change is told to both addresses and audited
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_email_change_mails_the_old_and_the_new_address_and_is_audited() {
    let (app, smtp) = with_mail(|_| {}).await;
    let mia = user(&app, "mia", "mia@clinic.test").await;
    let token = app.login("mia", "a-long-password-9").await;
    let r = app
        .call_as(
            &token,
            Method::PUT,
            "/api/v1/auth/profile",
            None,
            json!({ "name": "Mia", "email": "mia.new@clinic.test" }),
        )
        .await;
    assert_status(&r, 200);
    let mut recipients: Vec<String> =
        smtp.wait_for(2).await.iter().flat_map(|m| m.recipients.clone()).collect();
    recipients.sort();
    assert_eq!(recipients, ["mia.new@clinic.test", "mia@clinic.test"]);
    let rows = app.audit_rows(SYSTEM_AUDIT, None, "users", mia).await;
    let change = rows.iter().find(|r| r["action"] == "email_change").expect("an email_change audit row");
    assert_eq!(change["user_id"], mia);
    // Keeping the address sends nothing more.
    let r = app
        .call_as(
            &token,
            Method::PUT,
            "/api/v1/auth/profile",
            None,
            json!({ "name": "Mia M", "email": "mia.new@clinic.test" }),
        )
        .await;
    assert_status(&r, 200);
    assert_eq!(smtp.mails().len(), 2);
}

// ---------------------------------------------------------------------------------------
// 4. One branch cannot starve the others
// ---------------------------------------------------------------------------------------

/// Opens a connection that sends a request's headers and half its body, then holds.
async fn half_sent(app: &TestApp, branch: i64) -> tokio::net::TcpStream {
    let addr = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/patients HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nX-Branch-Id: {branch}\r\n\
         Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{{\"first_name\": \"Slow",
        app.admin_token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn six_half_sent_bodies_in_one_branch_leave_another_branch_served() {
    let app = TestApp::spawn_with(|s| {
        s.branch_pool_size = 2;
        s.pool_wait = Duration::from_secs(2);
        s.rate_limit_api = 10_000;
    })
    .await;
    let busy = app.main_branch().await;
    let quiet = app.create_branch("QUIET").await;
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(half_sent(&app, busy).await);
    }
    // Each of the six has been read up to its missing body: make sure they all arrived.
    let r = app.get("/api/v1/patients", Some(busy)).await;
    assert_status(&r, 200);
    let r = app.get("/api/v1/patients", Some(quiet)).await;
    assert_status(&r, 200);
    // And a write in the quiet branch too.
    assert_status(
        &app.post(
            "/api/v1/patients",
            Some(quiet),
            json!({ "first_name": "Q", "last_name": "Uiet", "birth_date": "1990-01-01", "sex": "male" }),
        )
        .await,
        201,
    );
    drop(held);
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_408_and_the_connection_closes() {
    let app = TestApp::spawn_with(|s| s.body_read_timeout = Duration::from_millis(300)).await;
    let branch = app.main_branch().await;
    let mut slow = half_sent(&app, branch).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server kept a slow body's connection open");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\""), "{text}");
}

#[tokio::test]
async fn one_branch_holds_at_most_its_share_of_the_pool() {
    let app = TestApp::spawn_with(|s| {
        s.branch_pool_size = 4;
        s.branch_pool_share_percent = 50;
        s.pool_wait = Duration::from_millis(300);
    })
    .await;
    let busy = app.main_branch().await;
    let quiet = app.create_branch("QUIET").await;
    let route = |id: i64| {
        let state = app.state.clone();
        async move { state.directory.route(id).await.unwrap().unwrap() }
    };
    let (busy_route, quiet_route) = (route(busy).await, route(quiet).await);
    let first = app.state.directory.connect(&busy_route).await.expect("first of two");
    let second = app.state.directory.connect(&busy_route).await.expect("second of two");
    assert!(app.state.directory.connect(&busy_route).await.is_err(), "a third connection for one branch");
    let other = app.state.directory.connect(&quiet_route).await.expect("another branch is still served");
    // Statements on these connections stop after STATEMENT_TIMEOUT_MS.
    let timeout: String = other.query_one("SHOW statement_timeout", &[]).await.unwrap().get(0);
    assert_eq!(timeout, "30s");
    drop((first, second, other));
    assert!(app.state.directory.connect(&busy_route).await.is_ok(), "released connections come back");
}

#[tokio::test]
async fn a_statement_past_the_timeout_is_stopped() {
    let app = TestApp::spawn_with(|s| s.statement_timeout = Duration::from_millis(200)).await;
    let branch = app.main_branch().await;
    let route = app.state.directory.route(branch).await.unwrap().unwrap();
    let conn = app.state.directory.connect(&route).await.unwrap();
    let err = conn.query_one("SELECT pg_sleep(2)", &[]).await.expect_err("stopped");
    assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::QUERY_CANCELED), "{err}");
}

// ---------------------------------------------------------------------------------------
// 5. Wildcards survive no normalisation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn fullwidth_wildcards_in_a_search_match_only_themselves() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    app.create_patient(branch, "Ana", "Cruz").await;
    app.create_patient(branch, "Bea", "Santos").await;
    let encode = |term: &str| form_urlencoded::byte_serialize(term.as_bytes()).collect::<String>();
    for term in ["\u{FF3F}\u{FF3F}\u{FF3F}", "\u{FF05}", "a\u{FF05}", "_", "%"] {
        // The list's search matches text literally, wildcards included.
        let r = app.get(&format!("/api/v1/patients?search={}", encode(term)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"].as_array().unwrap().len(), 0, "search {term}: {}", r.text);
    }
    // The type-ahead matches the starts of words: punctuation, wildcards included, only
    // separates words, so alone it matches nothing and beside a letter it is that letter.
    for term in ["\u{FF3F}\u{FF3F}\u{FF3F}", "\u{FF05}", "_", "%", "%_%"] {
        let r = app.get(&format!("/api/v1/patients/search?search={}", encode(term)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"].as_array().unwrap().len(), 0, "type-ahead {term}: {}", r.text);
    }
    let r = app.get(&format!("/api/v1/patients/search?search={}", encode("a\u{FF05}")), Some(branch)).await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{}", r.text);
    assert_eq!(r.body["data"][0]["first_name"], "Ana");
    let r = app.get("/api/v1/patients?search=cruz", Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 1);
}

// ---------------------------------------------------------------------------------------
// 6. What a clinic must see in its audit trails
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn grants_are_audited_as_they_are_after_the_change() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let id = user(&app, "gus", "gus@clinic.test").await;
    let r = app
        .put(&format!("/api/v1/users/{id}"), None, json!({ "role_ids": [3, 4], "branch_ids": [main, north] }))
        .await;
    assert_status(&r, 200);
    let rows = app.audit_rows(SYSTEM_AUDIT, None, "users", id).await;
    let update = rows.iter().rev().find(|r| r["action"] == "update").expect("an update row");
    let mut roles: Vec<i64> =
        update["after"]["role_ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    roles.sort();
    assert_eq!(roles, [3, 4], "{update}");
    let mut branches: Vec<i64> =
        update["after"]["branch_ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    branches.sort();
    let mut expected = vec![main, north];
    expected.sort();
    assert_eq!(branches, expected, "{update}");
    assert_eq!(update["before"]["role_ids"], json!([2]));
}

#[tokio::test]
async fn sign_ins_sign_outs_and_password_changes_are_audited() {
    let (app, smtp) = with_mail(|_| {}).await;
    let id = user(&app, "ivy", "ivy@clinic.test").await;
    assert_eq!(
        reply(
            app.http
                .post(app.url("/api/v1/auth/login"))
                .json(&json!({ "username": "ivy", "password": "wrong-password-1" }))
        )
        .await
        .status,
        401
    );
    let token = app.login("ivy", "a-long-password-9").await;
    let r = app
        .call_as(
            &token,
            Method::POST,
            "/api/v1/profile/change-password",
            None,
            json!({ "current_password": "a-long-password-9", "password": "another-password-8",
                    "password_confirmation": "another-password-8" }),
        )
        .await;
    assert_status(&r, 200);
    let token = app.login("ivy", "another-password-8").await;
    assert_status(&app.call_as(&token, Method::POST, "/api/v1/auth/logout", None, Value::Null).await, 200);
    assert_status(&public(&app, RESET_CODE, json!({ "email": "ivy@clinic.test" })).await, 200);
    let code = code_in(&smtp.wait_for(1).await[0].text);
    let r = public(
        &app,
        RESET_PASSWORD,
        json!({ "email": "ivy@clinic.test", "code": code, "password": "third-password-77",
                "password_confirmation": "third-password-77" }),
    )
    .await;
    assert_status(&r, 200);
    let actions: Vec<String> = app
        .audit_rows(SYSTEM_AUDIT, None, "users", id)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["login_failed", "login", "password_change", "logout", "reset_code", "password_reset"] {
        assert!(actions.iter().any(|a| a == expected), "{expected} missing from {actions:?}");
    }
    // The trail never holds a secret.
    let all = app.get(&format!("{SYSTEM_AUDIT}?perPage=100"), None).await;
    for secret in
        ["a-long-password-9", "another-password-8", "third-password-77", code.as_str(), token.as_str()]
    {
        assert!(!all.text.contains(secret), "the audit trail holds a secret");
    }
}

#[tokio::test]
async fn patient_lists_searches_and_type_ahead_record_who_saw_which_patients() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let ana = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let bea = id_of(&app.create_patient(branch, "Bea", "Cruz").await);
    let _cy = id_of(&app.create_patient(branch, "Cy", "Santos").await);
    let (nurse_id, nurse) = app.create_user("nina", &["nurse"], &[branch]).await;
    for path in
        ["/api/v1/patients?search=cruz", "/api/v1/patients/search?search=cruz", "/api/v1/patients?perPage=2"]
    {
        assert_status(&app.call_as(&nurse, Method::GET, path, Some(branch), Value::Null).await, 200);
    }
    let r = app
        .get(
            &format!(
                "/api/v1/audit-logs?perPage=100&filters[user_id]={nurse_id}&sortField=id&sortDirection=asc"
            ),
            Some(branch),
        )
        .await;
    assert_status(&r, 200);
    let rows = r.body["data"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{}", r.text);
    let seen = |row: &Value| -> Vec<i64> {
        let mut ids: Vec<i64> =
            row["after"]["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        ids.sort();
        ids
    };
    assert_eq!(rows[0]["action"], "search");
    assert_eq!(seen(&rows[0]), [ana, bea]);
    assert_eq!(rows[1]["action"], "search");
    assert_eq!(seen(&rows[1]), [ana, bea]);
    assert_eq!(rows[2]["action"], "list");
    assert_eq!(seen(&rows[2]).len(), 2);
}

#[tokio::test]
async fn the_registry_trail_is_read_by_administrators_only_with_the_usual_filters() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let id = user(&app, "otto", "otto@clinic.test").await;
    let r = app.get(&format!("{SYSTEM_AUDIT}?filters[action]=create&filters[resource]=users"), None).await;
    assert_status(&r, 200);
    assert!(r.body["data"].as_array().unwrap().iter().any(|row| row["record_id"] == id), "{}", r.text);
    assert!(r.body["data"].as_array().unwrap().iter().all(|row| row["action"] == "create"));
    let r = app.get(&format!("{SYSTEM_AUDIT}?filters[colour]=red"), None).await;
    assert_eq!(r.status, 422, "{}", r.text);
    let (_, doctor) = app.create_user("dora", &["doctor"], &[branch]).await;
    assert_error(&app.call_as(&doctor, Method::GET, SYSTEM_AUDIT, None, Value::Null).await, 403, "forbidden");
}

// ---------------------------------------------------------------------------------------
// 7. Token probing costs nothing and is limited
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn made_up_tokens_are_cached_as_unknown_and_limited_per_address() {
    let app = TestApp::spawn_with(|s| s.rate_limit_bad_token = 3).await;
    let probe = |token: String| {
        let app = &app;
        async move { reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await }
    };
    // Token id 900: unknown. Once looked up, the miss is remembered: a row inserted behind the
    // server's back (no notification) is not seen.
    let secret = "a".repeat(40);
    assert_error(&probe(format!("900|{secret}")).await, 401, "unauthenticated");
    {
        let client = app.state.registry.get().await.unwrap();
        let admin = app.admin_id().await;
        client
            .execute(
                "INSERT INTO api_tokens (id, user_id, secret_hash) VALUES (900, $1, $2)",
                &[&admin, &clinic_server::security::tokens::hash_secret(&secret)],
            )
            .await
            .unwrap();
    }
    assert_error(&probe(format!("900|{secret}")).await, 401, "unauthenticated");
    assert_error(&probe(format!("901|{secret}")).await, 401, "unauthenticated");
    // Past three failures this address gets 429, even with a valid token, until its minute ends.
    let r = probe(format!("902|{secret}")).await;
    assert_error(&r, 429, "rate_limited");
    assert!(
        r.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| (1..=60).contains(&s))),
        "{:?}",
        r.headers
    );
    assert_error(&probe(app.admin_token.clone()).await, 429, "rate_limited");
}

// ---------------------------------------------------------------------------------------
// 10. Smaller holes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn concurrent_user_writes_on_a_small_registry_pool_all_finish() {
    let app = TestApp::spawn_with(|s| {
        s.registry_pool_size = 2;
        s.pool_wait = Duration::from_secs(5);
    })
    .await;
    let branch = app.main_branch().await;
    let mut users = Vec::new();
    for n in 0..4 {
        users.push(user(&app, &format!("user{n}"), &format!("user{n}@clinic.test")).await);
    }
    let writes = users.iter().flat_map(|id| {
        let app = &app;
        (0..3).map(move |k| async move {
            app.put(
                &format!("/api/v1/users/{id}"),
                None,
                json!({ "role_ids": [2 + k % 2], "branch_ids": [branch] }),
            )
            .await
        })
    });
    for r in join_all(writes).await {
        assert_status(&r, 200);
    }
}

#[tokio::test]
async fn a_branch_database_must_be_on_a_listed_host() {
    let app = TestApp::spawn().await;
    let r = app
        .post(
            "/api/v1/branches",
            None,
            json!({ "code": "EVIL", "name": "Evil", "database_url": "postgres://postgres@attacker.example:5432/x" }),
        )
        .await;
    assert_invalid(&r, &["database_url"]);
    let client = app.state.registry.get().await.unwrap();
    let n: i64 =
        client.query_one("SELECT count(*) FROM branches WHERE code = 'EVIL'", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn provisioning_refuses_a_schema_it_did_not_make_and_leaves_it_alone() {
    let app = TestApp::spawn().await;
    let client = app.state.registry.get().await.unwrap();
    let next: i64 = client.query_one("SELECT last_value + 1 FROM branches_id_seq", &[]).await.unwrap().get(0);
    client
        .batch_execute(&format!("CREATE SCHEMA branch_{next}; CREATE TABLE branch_{next}.keep_me (x int); INSERT INTO branch_{next}.keep_me VALUES (42);"))
        .await
        .unwrap();
    let r = app.post("/api/v1/branches", None, json!({ "code": "TAKEN", "name": "Taken" })).await;
    assert_error(&r, 409, "schema_exists");
    let kept: i32 =
        client.query_one(&format!("SELECT x FROM branch_{next}.keep_me"), &[]).await.unwrap().get(0);
    assert_eq!(kept, 42, "the foreign schema was dropped or changed");
}

#[tokio::test]
async fn every_function_of_a_branch_schema_has_a_fixed_search_path() {
    let app = TestApp::spawn().await;
    let client = app.state.registry.get().await.unwrap();
    let loose: Vec<String> = client
        .query(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'branch_1'
                AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(loose.is_empty(), "functions without a fixed search_path: {loose:?}");
    let count: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'branch_1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(count >= 5, "the branch schema's functions were not found ({count})");
}

#[tokio::test]
async fn common_passwords_and_ones_equal_to_the_name_or_address_are_refused() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    for password in ["password123", "qwertyuiop", "walter.white", "walter@clinic.test", "WALTER.WHITE"] {
        let r = app
            .post(
                "/api/v1/users",
                None,
                json!({ "name": "Walter", "email": "walter@clinic.test", "username": "walter.white",
                        "password": password, "role_ids": [2], "branch_ids": [branch] }),
            )
            .await;
        assert_invalid(&r, &["password"]);
    }
}

// ---------------------------------------------------------------------------------------
// 11. CORS for listed origins only
// ---------------------------------------------------------------------------------------

async fn preflight(app: &TestApp, origin: &str) -> reqwest::Response {
    app.http
        .request(Method::OPTIONS, app.url("/api/v1/patients"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type,x-branch-id,if-match,idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn cors_answers_listed_origins_only() {
    let app = TestApp::spawn_with(|s| s.cors_allowed_origins = vec!["https://clinic.example".into()]).await;
    let res = preflight(&app, "https://clinic.example").await;
    assert_eq!(res.status(), 204, "{}", res.status());
    let headers = res.headers();
    assert_eq!(headers["access-control-allow-origin"], "https://clinic.example");
    let allowed = headers["access-control-allow-headers"].to_str().unwrap().to_ascii_lowercase();
    for header in ["authorization", "content-type", "x-branch-id", "if-match", "idempotency-key"] {
        assert!(allowed.contains(header), "{header} not allowed: {allowed}");
    }
    // A real request exposes the headers a front-end reads.
    let res = app
        .request(Method::GET, "/api/v1/auth/profile", None)
        .header("origin", "https://clinic.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["access-control-allow-origin"], "https://clinic.example");
    let exposed = res.headers()["access-control-expose-headers"].to_str().unwrap().to_ascii_lowercase();
    for header in ["etag", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining"] {
        assert!(exposed.contains(header), "{header} not exposed: {exposed}");
    }
    // An origin not listed gets no CORS header at all.
    let res = preflight(&app, "https://evil.example").await;
    assert!(res.headers().get("access-control-allow-origin").is_none(), "{:?}", res.headers());
    let res = app
        .request(Method::GET, "/api/v1/auth/profile", None)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(res.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn without_listed_origins_no_cors_header_is_sent() {
    let app = TestApp::spawn().await;
    let res = preflight(&app, "https://clinic.example").await;
    assert!(res.headers().keys().all(|k| !k.as_str().starts_with("access-control-")), "{:?}", res.headers());
}
