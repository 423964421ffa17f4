//! Password hashes: argon2id at OWASP's floor or above, and a weaker stored hash rehashed by
//! the login that proves its password.

use clinic_server::config::HashCost;
use scrypt::password_hash::PasswordHasher as _;

use crate::support::{ADMIN_PASSWORD, TestApp, TestDb, assert_status};

async fn stored_hash(app: &TestApp) -> String {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client.query_one("SELECT password_hash FROM users WHERE username = 'admin'", &[]).await.unwrap().get(0)
}

async fn store_hash(app: &TestApp, hash: &str) {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    client.execute("UPDATE users SET password_hash = $1 WHERE username = 'admin'", &[&hash]).await.unwrap();
}

async fn rehashes(app: &TestApp) -> Vec<serde_json::Value> {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let rows = client
        .query("SELECT after FROM audit_log WHERE action = 'password_rehash' ORDER BY id", &[])
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn a_scrypt_hash_is_replaced_by_argon2id_at_the_next_login_once() {
    let app = TestApp::spawn().await;
    let scrypt = scrypt::Scrypt::new_with_params(scrypt::Params::new(4, 8, 1).unwrap())
        .hash_password(ADMIN_PASSWORD.as_bytes())
        .unwrap()
        .to_string();
    store_hash(&app, &scrypt).await;
    let r = app.login_reply("admin", "not-the-password").await;
    assert_status(&r, 401);
    assert_eq!(stored_hash(&app).await, scrypt, "a failed login rehashes nothing");
    app.login("admin", ADMIN_PASSWORD).await;
    let now = stored_hash(&app).await;
    assert!(now.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{now}");
    app.login("admin", ADMIN_PASSWORD).await;
    assert_eq!(stored_hash(&app).await, now, "a current hash stays");
    let audited = rehashes(&app).await;
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0]["from"], "scrypt ln=4,r=8,p=1");
    assert_eq!(audited[0]["to"], "argon2id m=8,t=1,p=1");
    assert!(!audited[0].to_string().contains(&now[now.len() - 20..]), "no hash in the audit trail");
}

#[tokio::test]
async fn an_argon2id_hash_below_the_current_cost_is_raised() {
    let app =
        TestApp::spawn_with(|s| s.password_hash_cost = HashCost { memory_kib: 64, iterations: 2 }).await;
    let cheaper = argon2::Argon2::new(
        argon2::Algorithm::Argon2id,
        argon2::Version::V0x13,
        argon2::Params::new(64, 1, 1, None).unwrap(),
    )
    .hash_password(ADMIN_PASSWORD.as_bytes())
    .unwrap()
    .to_string();
    store_hash(&app, &cheaper).await;
    app.login("admin", ADMIN_PASSWORD).await;
    assert!(stored_hash(&app).await.starts_with("$argon2id$v=19$m=64,t=2,p=1$"));
    // The harness's own login already raised the template's cheap hash once.
    let last = rehashes(&app).await.pop().unwrap();
    assert_eq!(
        (last["from"].as_str(), last["to"].as_str()),
        (Some("argon2id m=64,t=1,p=1"), Some("argon2id m=64,t=2,p=1"))
    );
}

fn start_with(db: &TestDb, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_clinic-server"));
    command
        .args(["branch", "list"])
        .env("DATABASE_URL", &db.url)
        .env("RUST_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("PASSWORD_HASH_WEAK_FOR_TESTS");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the binary runs")
}

#[tokio::test]
async fn a_cost_below_the_floor_refuses_to_start_unless_named_for_tests() {
    let db = TestDb::create().await;
    let weak = start_with(&db, &[("PASSWORD_HASH_MEMORY_KIB", "19456")]);
    assert!(!weak.status.success());
    let said = String::from_utf8_lossy(&weak.stderr);
    assert!(
        said.contains("below OWASP's floor") && said.contains("PASSWORD_HASH_MEMORY_KIB=19456"),
        "{said}"
    );
    let allowed =
        start_with(&db, &[("PASSWORD_HASH_MEMORY_KIB", "8"), ("PASSWORD_HASH_WEAK_FOR_TESTS", "true")]);
    assert!(allowed.status.success(), "{allowed:?}");
    let traded = start_with(&db, &[("PASSWORD_HASH_MEMORY_KIB", "19456"), ("PASSWORD_HASH_ITERATIONS", "2")]);
    assert!(traded.status.success(), "OWASP's second form: {traded:?}");
    let old = start_with(&db, &[("PASSWORD_HASH_COST", "15")]);
    assert!(!old.status.success());
    assert!(String::from_utf8_lossy(&old.stderr).contains("PASSWORD_HASH_COST"), "{old:?}");
}
