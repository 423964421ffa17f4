//! One branch cannot starve the others: slow bodies, pool shares, statement timeouts and a
//! small registry pool.

use super::*;

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
