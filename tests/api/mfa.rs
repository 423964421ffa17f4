//! The second factor: enrolment, login with a TOTP or recovery code, no replay, the limit of
//! wrong codes, turning it off, an administrator's reset, and `MFA_REQUIRED_FOR`. Codes are
//! computed here by RFC 6238 on the `hmac` and `sha1` crates, apart from the server's.

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::mail::spawn_with_smtp;
use crate::support::{Reply, TestApp, assert_error, assert_invalid, assert_status, reply};

const LOGIN: &str = "/api/v1/auth/login";
const TOTP: &str = "/api/v1/auth/mfa/totp";
const CONFIRM: &str = "/api/v1/auth/mfa/totp/confirm";
const PROFILE: &str = "/api/v1/auth/profile";
const PASSWORD: &str = "user-password-1";

/// RFC 6238 with HMAC-SHA1: the code of time step `step`, `digits` long.
pub(crate) fn code_of(secret: &[u8], step: u64, digits: u32) -> String {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret).unwrap();
    mac.update(&step.to_be_bytes());
    let hash = mac.finalize().into_bytes();
    let offset = (hash[19] & 0x0f) as usize;
    let value =
        u32::from_be_bytes([hash[offset] & 0x7f, hash[offset + 1], hash[offset + 2], hash[offset + 3]]);
    format!("{:0width$}", value % 10u32.pow(digits), width = digits as usize)
}

pub(crate) fn step_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 30
}

/// Six digits that are no code of the steps around now.
fn wrong_code(secret: &[u8]) -> String {
    let now = step_now();
    let near: Vec<String> = (now - 2..=now + 2).map(|s| code_of(secret, s, 6)).collect();
    (0..).map(|n| format!("{:06}", 123_456 + n)).find(|c| !near.contains(c)).unwrap()
}

#[test]
fn the_test_totp_agrees_with_rfc_6238() {
    // Appendix B: the SHA1 key, T = 59 s, 8 digits.
    assert_eq!(code_of(b"12345678901234567890", 59 / 30, 8), "94287082");
    assert_eq!(code_of(b"12345678901234567890", 1_111_111_109 / 30, 8), "07081804");
}

fn relax(s: &mut clinic_server::config::Settings) {
    s.rate_limit_login = 1000;
    s.rate_limit_auth = 1000;
}

async fn login(app: &TestApp, username: &str, password: &str, otp: Option<Value>) -> Reply {
    let mut body = json!({ "username": username, "password": password });
    if let Some(otp) = otp {
        body["otp"] = otp;
    }
    reply(app.http.post(app.url(LOGIN)).json(&body)).await
}

async fn call(app: &TestApp, token: &str, method: Method, path: &str, body: Value) -> Reply {
    app.call_as(token, method, path, None, body).await
}

/// Starts an enrolment: the secret's bytes and the whole answer.
pub(crate) async fn start(app: &TestApp, token: &str) -> (Vec<u8>, Value) {
    let r = call(app, token, Method::POST, TOTP, Value::Null).await;
    assert_status(&r, 200);
    let secret = r.body["data"]["secret"].as_str().unwrap();
    (data_encoding::BASE32_NOPAD.decode(secret.as_bytes()).unwrap(), r.body["data"].clone())
}

/// A user with the factor on: (id, token, secret, recovery codes). The confirming code is
/// of the current step, so the next login takes the next step's.
pub(crate) async fn enrolled(app: &TestApp, username: &str) -> (i64, String, Vec<u8>, Vec<String>) {
    let (id, token) = app.create_user(username, &["nurse"], &[]).await;
    let (secret, _) = start(app, &token).await;
    let r =
        call(app, &token, Method::POST, CONFIRM, json!({ "code": code_of(&secret, step_now(), 6) })).await;
    assert_status(&r, 200);
    let codes = r.body["data"]["recovery_codes"].as_array().unwrap();
    let codes = codes.iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    (id, token, secret, codes)
}

#[tokio::test]
async fn enrolment_answers_a_uri_and_a_qr_code_and_a_right_code_turns_it_on() {
    let app = TestApp::spawn_with(relax).await;
    let (id, token) = app.create_user("mira", &["nurse"], &[]).await;
    let (first, _) = start(&app, &token).await;
    let (secret, data) = start(&app, &token).await;
    assert_eq!(secret.len(), 20, "160 bits");
    assert_ne!(first, secret, "starting again replaces the pending secret");

    let uri = reqwest::Url::parse(data["otpauth_uri"].as_str().unwrap()).unwrap();
    assert_eq!(uri.scheme(), "otpauth");
    assert_eq!(uri.host_str(), Some("totp"));
    assert_eq!(uri.path(), "/clinic-server:mira");
    let query: std::collections::BTreeMap<String, String> = uri.query_pairs().into_owned().collect();
    assert_eq!(query["secret"], data["secret"].as_str().unwrap());
    assert_eq!(query["issuer"], "clinic-server");
    assert_eq!(
        (query["algorithm"].as_str(), query["digits"].as_str(), query["period"].as_str()),
        ("SHA1", "6", "30")
    );
    let svg = data["qr_svg"].as_str().unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");

    // The code of the replaced secret, a wrong code, a missing one, a number: 422 on code.
    let r =
        call(&app, &token, Method::POST, CONFIRM, json!({ "code": code_of(&first, step_now(), 6) })).await;
    assert_invalid(&r, &["code"]);
    let r = call(&app, &token, Method::POST, CONFIRM, json!({ "code": wrong_code(&secret) })).await;
    assert_invalid(&r, &["code"]);
    assert_invalid(&call(&app, &token, Method::POST, CONFIRM, json!({})).await, &["code"]);
    assert_invalid(&call(&app, &token, Method::POST, CONFIRM, json!({ "code": 123456 })).await, &["code"]);

    let r =
        call(&app, &token, Method::POST, CONFIRM, json!({ "code": code_of(&secret, step_now(), 6) })).await;
    assert_status(&r, 200);
    let codes = r.body["data"]["recovery_codes"].as_array().unwrap();
    assert_eq!(codes.len(), 10);
    let distinct: std::collections::BTreeSet<&str> = codes.iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(distinct.len(), 10);
    for code in distinct {
        let groups: Vec<&str> = code.split('-').collect();
        assert_eq!(groups.len(), 4, "{code}");
        assert!(
            groups
                .iter()
                .all(|g| g.len() == 4
                    && g.bytes().all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)))
        );
    }
    assert_error(&call(&app, &token, Method::POST, TOTP, Value::Null).await, 409, "mfa_already_enabled");
    let actions: Vec<String> = app
        .audit_rows("/api/v1/system-audit-logs", None, "users", id)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    for action in ["mfa_enrolment_started", "mfa_enabled"] {
        assert!(actions.iter().any(|a| a == action), "{action} in {actions:?}");
    }
}

#[tokio::test]
async fn login_asks_for_the_code_and_takes_each_once() {
    let app = TestApp::spawn_with(relax).await;
    let (id, _, secret, recovery) = enrolled(&app, "omar").await;
    assert_error(&login(&app, "omar", PASSWORD, None).await, 401, "otp_required");
    // The password comes first, whatever the code.
    let next = code_of(&secret, step_now() + 1, 6);
    let r = login(&app, "omar", "wrong-password-9", Some(json!(next))).await;
    assert_status(&r, 401);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    assert_error(&login(&app, "omar", PASSWORD, Some(json!(wrong_code(&secret)))).await, 401, "invalid_otp");
    assert_invalid(&login(&app, "omar", PASSWORD, Some(json!("12"))).await, &["otp"]);
    assert_invalid(&login(&app, "omar", PASSWORD, Some(json!(123456))).await, &["otp"]);

    let r = login(&app, "omar", PASSWORD, Some(json!(next))).await;
    assert_status(&r, 200);
    assert!(r.body["data"]["token"].is_string());
    // The same code again, and the confirming step's code: refused.
    assert_error(&login(&app, "omar", PASSWORD, Some(json!(next))).await, 401, "invalid_otp");
    let confirming = code_of(&secret, step_now() - 1, 6);
    if confirming != next {
        assert_error(&login(&app, "omar", PASSWORD, Some(json!(confirming))).await, 401, "invalid_otp");
    }

    // A recovery code works once; typed in lower case without hyphens too.
    assert_status(&login(&app, "omar", PASSWORD, Some(json!(recovery[0]))).await, 200);
    assert_error(&login(&app, "omar", PASSWORD, Some(json!(recovery[0]))).await, 401, "invalid_otp");
    let typed = recovery[1].replace('-', "").to_lowercase();
    assert_status(&login(&app, "omar", PASSWORD, Some(json!(typed))).await, 200);

    let rows = app.audit_rows("/api/v1/system-audit-logs", None, "users", id).await;
    let logins: Vec<&Value> = rows.iter().filter(|r| r["action"] == "login").collect();
    // The first, before the factor was on, as before; then one per right code.
    assert_eq!(logins.len(), 4, "{rows:?}");
    assert_eq!(logins[0]["after"], json!({ "ip": "127.0.0.1" }));
    assert!(logins[1..].iter().all(|r| r["after"]["mfa"] == true), "{logins:?}");
    assert!(rows.iter().any(|r| r["action"] == "otp_failed"), "{rows:?}");
}

#[tokio::test]
async fn wrong_codes_past_the_limit_are_refused_until_the_window_passes() {
    let app = TestApp::spawn_with(relax).await;
    let (_, _, secret, recovery) = enrolled(&app, "lena").await;
    let wrong = wrong_code(&secret);
    for _ in 0..4 {
        assert_error(&login(&app, "lena", PASSWORD, Some(json!(wrong))).await, 401, "invalid_otp");
    }
    // A right code clears the count.
    assert_status(&login(&app, "lena", PASSWORD, Some(json!(recovery[0]))).await, 200);
    for _ in 0..4 {
        assert_error(&login(&app, "lena", PASSWORD, Some(json!(wrong))).await, 401, "invalid_otp");
    }
    // A wrong recovery code counts too: the fifth.
    let r = login(&app, "lena", PASSWORD, Some(json!("AAAA-BBBB-CCCC-DDDD"))).await;
    assert_error(&r, 401, "invalid_otp");
    // Past five, every code is refused, the right one included.
    let r = login(&app, "lena", PASSWORD, Some(json!(recovery[1]))).await;
    assert_error(&r, 429, "rate_limited");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=900).contains(&retry), "Retry-After {retry}");
    assert_error(&login(&app, "lena", PASSWORD, Some(json!(wrong))).await, 429, "rate_limited");
    // A wrong password is still only that.
    let r = login(&app, "lena", "wrong-password-9", Some(json!(recovery[1]))).await;
    assert_status(&r, 401);
}

#[tokio::test]
async fn turning_it_off_takes_the_password_and_a_code() {
    let app = TestApp::spawn_with(relax).await;
    let (id, token, secret, recovery) = enrolled(&app, "ines").await;
    let off = |body: Value| call(&app, &token, Method::DELETE, TOTP, body);
    assert_invalid(&off(json!({})).await, &["current_password", "code"]);
    assert_invalid(&off(json!({ "current_password": PASSWORD, "code": "1234" })).await, &["code"]);
    let r = off(json!({ "current_password": "wrong-password-9", "code": recovery[0] })).await;
    assert_invalid(&r, &["current_password"]);
    let r = off(json!({ "current_password": PASSWORD, "code": wrong_code(&secret) })).await;
    assert_invalid(&r, &["code"]);
    let r = off(json!({ "current_password": PASSWORD, "code": recovery[0] })).await;
    assert_status(&r, 200);
    assert_status(&login(&app, "ines", PASSWORD, None).await, 200);
    assert_error(
        &off(json!({ "current_password": PASSWORD, "code": recovery[1] })).await,
        409,
        "mfa_not_enabled",
    );
    let rows = app.audit_rows("/api/v1/system-audit-logs", None, "users", id).await;
    assert!(rows.iter().any(|r| r["action"] == "mfa_disabled"), "{rows:?}");
    // And it can be turned on again, with a new secret.
    let (again, _) = start(&app, &token).await;
    assert_ne!(again, secret);
}

#[tokio::test]
async fn an_administrator_reset_ends_the_sessions_and_mails_the_user() {
    let (app, smtp) = spawn_with_smtp(relax).await;
    let (id, token, _, recovery) = enrolled(&app, "tomas").await;
    let r = login(&app, "tomas", PASSWORD, Some(json!(recovery[0]))).await;
    assert_status(&r, 200);
    let second = r.body["data"]["token"].as_str().unwrap().to_owned();
    let (_, nurse) = app.create_user("nadia", &["nurse"], &[]).await;
    let reset = format!("/api/v1/users/{id}/mfa/reset");
    assert_error(&call(&app, &nurse, Method::POST, &reset, Value::Null).await, 403, "forbidden");

    assert_status(&app.post(&reset, None, Value::Null).await, 200);
    for token in [&token, &second] {
        assert_error(&call(&app, token, Method::GET, PROFILE, Value::Null).await, 401, "unauthenticated");
    }
    let mail = smtp.wait_for(1).await.remove(0);
    assert_eq!(mail.recipients, vec!["tomas@example.test".to_owned()]);
    assert!(mail.text.contains("second factor"), "{}", mail.text);
    assert_status(&login(&app, "tomas", PASSWORD, None).await, 200);

    assert_error(&app.post(&reset, None, Value::Null).await, 409, "mfa_not_enabled");
    assert_error(&app.post("/api/v1/users/999999/mfa/reset", None, Value::Null).await, 404, "not_found");
    let rows = app.audit_rows("/api/v1/system-audit-logs", None, "users", id).await;
    assert!(rows.iter().any(|r| r["action"] == "mfa_reset"), "{rows:?}");
}

#[tokio::test]
async fn mfa_required_for_holds_an_administrator_to_enrolment() {
    let app = TestApp::spawn_with(|s| {
        relax(s);
        s.mfa_required_for = vec!["admin.access".into()];
    })
    .await;
    let branch = app.main_branch().await;
    let admin = app.admin_token.clone();
    assert_error(&app.get("/api/v1/patients", Some(branch)).await, 403, "mfa_enrolment_required");
    assert_error(&app.get("/api/v1/users", None).await, 403, "mfa_enrolment_required");
    assert_status(&app.get(PROFILE, None).await, 200);
    let r = app.put(PROFILE, None, json!({ "name": "Admin", "email": "admin@example.test" })).await;
    assert_error(&r, 403, "mfa_enrolment_required");
    // Someone without the permission is not held.
    let (_, nurse) = app.create_user("nico", &["nurse"], &[branch]).await;
    let r = reply(app.request_as(&nurse, Method::GET, "/api/v1/patients", Some(branch))).await;
    assert_status(&r, 200);

    let (secret, _) = start(&app, &admin).await;
    let r =
        call(&app, &admin, Method::POST, CONFIRM, json!({ "code": code_of(&secret, step_now(), 6) })).await;
    assert_status(&r, 200);
    assert_status(&app.get("/api/v1/patients", Some(branch)).await, 200);
    assert_status(&call(&app, &admin, Method::POST, "/api/v1/auth/logout", Value::Null).await, 200);
}

#[tokio::test]
async fn an_unknown_permission_in_mfa_required_for_stops_the_start() {
    let mut settings = clinic_server::config::Settings::for_database("postgres://nowhere.invalid/x");
    settings.mfa_required_for = vec!["admin.acces".into()];
    let error = clinic_server::app::prepare(settings, "postgres://nowhere.invalid/x").await.err().unwrap();
    assert!(format!("{error:#}").contains("MFA_REQUIRED_FOR"), "{error:#}");
}

#[tokio::test]
async fn users_without_a_second_factor_log_in_as_before() {
    let app = TestApp::spawn_with(relax).await;
    app.create_user("ruth", &["nurse"], &[]).await;
    let plain = login(&app, "ruth", PASSWORD, None).await;
    assert_status(&plain, 200);
    for otp in [json!("123456"), json!("not a code"), json!(null)] {
        let r = login(&app, "ruth", PASSWORD, Some(otp)).await;
        assert_status(&r, 200);
        let without_token = |b: &Value| {
            let mut b = b.clone();
            b["data"]["token"] = Value::Null;
            b
        };
        assert_eq!(without_token(&r.body), without_token(&plain.body));
    }
    // What the body holds is checked as declared, for every account: a code is a string.
    assert_invalid(&login(&app, "ruth", PASSWORD, Some(json!(42))).await, &["otp"]);
    let r = login(&app, "ruth", "wrong-password-9", Some(json!("123456"))).await;
    assert_status(&r, 401);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
}

#[tokio::test]
async fn idempotency_key_replays_the_confirmation() {
    let app = TestApp::spawn_with(relax).await;
    let (_, token) = app.create_user("vera", &["nurse"], &[]).await;
    let (secret, _) = start(&app, &token).await;
    let body = json!({ "code": code_of(&secret, step_now(), 6) });
    let keyed = |key: &str| {
        reply(app.request_as(&token, Method::POST, CONFIRM, None).header("idempotency-key", key).json(&body))
    };
    let first = keyed("confirm-1").await;
    assert_status(&first, 200);
    let again = keyed("confirm-1").await;
    assert_status(&again, 200);
    assert_eq!(again.body, first.body, "the same recovery codes");
    assert_error(&keyed("confirm-2").await, 409, "mfa_already_enabled");
    // The kept answer is sealed: no code can be read in the database.
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let kept: Value = client
        .query_one("SELECT response FROM idempotency_keys WHERE key = 'confirm-1'", &[])
        .await
        .unwrap()
        .get(0);
    let codes = first.body["data"]["recovery_codes"].as_array().unwrap();
    assert_eq!(codes.len(), 10);
    for code in codes {
        let code = code.as_str().unwrap();
        assert!(
            !kept.to_string().contains(code) && !kept.to_string().contains(&code.replace('-', "")),
            "{kept}"
        );
    }
    assert!(kept["sealed"].is_string(), "{kept}");
    // Another session of the same user cannot open it.
    let other = login(&app, "vera", PASSWORD, Some(json!(code_of(&secret, step_now() + 1, 6)))).await;
    assert_status(&other, 200);
    let other = other.body["data"]["token"].as_str().unwrap().to_owned();
    let r = reply(
        app.request_as(&other, Method::POST, CONFIRM, None)
            .header("idempotency-key", "confirm-1")
            .json(&body),
    )
    .await;
    assert_error(&r, 409, "idempotency_answer_sealed");
}
