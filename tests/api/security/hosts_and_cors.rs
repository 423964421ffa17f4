//! Branch database hosts and schemas, and CORS for listed origins only.

use super::*;

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

// ---------------------------------------------------------------------------------------
// 11. CORS for listed origins only
// ---------------------------------------------------------------------------------------

async fn preflight(app: &TestApp, origin: &str) -> Reply {
    reply(
        app.http
            .request(Method::OPTIONS, app.url("/api/v1/patients"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,x-branch-id,if-match,idempotency-key",
            ),
    )
    .await
}

#[tokio::test]
async fn cors_answers_listed_origins_only() {
    let app = TestApp::spawn_with(|s| s.cors_allowed_origins = vec!["https://clinic.example".into()]).await;
    let res = preflight(&app, "https://clinic.example").await;
    assert_status(&res, 204);
    assert_eq!(res.header("access-control-allow-origin"), Some("https://clinic.example"));
    let allowed = res.header("access-control-allow-headers").unwrap().to_ascii_lowercase();
    for header in ["authorization", "content-type", "x-branch-id", "if-match", "idempotency-key"] {
        assert!(allowed.contains(header), "{header} not allowed: {allowed}");
    }
    // A real request exposes the headers a front-end reads.
    let res = reply(
        app.request(Method::GET, "/api/v1/auth/profile", None).header("origin", "https://clinic.example"),
    )
    .await;
    assert_eq!(res.header("access-control-allow-origin"), Some("https://clinic.example"));
    let exposed = res.header("access-control-expose-headers").unwrap().to_ascii_lowercase();
    for header in ["etag", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining"] {
        assert!(exposed.contains(header), "{header} not exposed: {exposed}");
    }
    // An origin not listed gets no CORS header at all.
    let res = preflight(&app, "https://evil.example").await;
    assert!(res.header("access-control-allow-origin").is_none(), "{:?}", res.headers);
    let res = reply(
        app.request(Method::GET, "/api/v1/auth/profile", None).header("origin", "https://evil.example"),
    )
    .await;
    assert!(res.header("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn without_listed_origins_no_cors_header_is_sent() {
    let app = TestApp::spawn().await;
    let res = preflight(&app, "https://clinic.example").await;
    assert!(res.headers.keys().all(|k| !k.as_str().starts_with("access-control-")), "{:?}", res.headers);
}
