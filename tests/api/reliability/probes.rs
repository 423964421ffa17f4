//! The orchestrators' probes: liveness never touches the database; readiness is 503 while
//! the registry does not answer or the instance drains.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{TestApp, assert_error, assert_status, reply};

#[tokio::test]
async fn liveness_holds_and_readiness_follows_the_registry() {
    let app = TestApp::spawn().await;
    let get = |path: &str| reply(app.http.get(app.url(path)));
    let ready = get("/api/v1/public/ready").await;
    assert_status(&ready, 200);
    assert_eq!(ready.body["data"]["status"], "ready");
    let live = get("/api/v1/public/live").await;
    assert_status(&live, 200);
    assert_eq!(live.body["data"]["status"], "alive");

    app.database_reachable(false).await;
    let started = Instant::now();
    let ready = get("/api/v1/public/ready").await;
    let took = started.elapsed();
    let live = get("/api/v1/public/live").await;
    app.database_reachable(true).await;
    assert_error(&ready, 503, "registry_unavailable");
    assert!(ready.header("retry-after").is_some());
    assert!(took < Duration::from_secs(3), "the probe is quick: {took:?}");
    assert_status(&live, 200); // liveness does not ask the database

    // Back as soon as the registry answers again.
    let ready = get("/api/v1/public/ready").await;
    assert_status(&ready, 200);
}

#[tokio::test]
async fn readiness_is_503_while_draining_and_liveness_stays_200() {
    use salvo::test::{ResponseExt, TestClient};
    let app = TestApp::spawn().await;
    app.state.drain.start();
    let service = clinic_server::app::service(app.state.clone());
    let mut ready = TestClient::get("http://127.0.0.1/api/v1/public/ready").send(&service).await;
    assert_eq!(ready.status_code.unwrap().as_u16(), 503);
    assert!(ready.headers().get("retry-after").is_some());
    let body: serde_json::Value = ready.take_json().await.unwrap();
    assert_eq!((&body["code"], &body["data"]["status"]), (&json!("draining"), &json!("draining")));
    let live = TestClient::get("http://127.0.0.1/api/v1/public/live").send(&service).await;
    assert_eq!(live.status_code.unwrap().as_u16(), 200);
}

#[tokio::test]
async fn the_probes_are_described_and_health_is_unchanged() {
    let app = TestApp::spawn().await;
    let doc = reply(app.http.get(app.url("/docs/api/openapi.json"))).await.body;
    for (path, statuses) in [("live", &["200"][..]), ("ready", &["200", "503"]), ("health", &["200", "503"])]
    {
        let op = &doc["paths"][format!("/api/v1/public/{path}")]["get"];
        for status in statuses {
            assert!(op["responses"][status].is_object(), "{path} {status}: {op}");
        }
        assert!(op.get("security").is_none_or(|s| s.as_array().is_some_and(|a| a.is_empty())), "{op}");
    }
    let health = reply(app.http.get(app.url("/api/v1/public/health"))).await;
    assert_status(&health, 200);
    assert_eq!(health.body["data"]["status"], "ok");
    assert_eq!(health.body["data"]["registry"], "up");
}
