//! Access: tokens, login and logout, rate limits, the branch header and permissions.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn missing_token_is_401_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", main.to_string())).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.post(app.url("/api/v1/auth/logout"))).await;
    assert_error(&r, 401, "unauthenticated");
}

#[tokio::test]
async fn garbage_or_wrong_tokens_are_401() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (id, _) = app.admin_token.split_once('|').expect("token is <id>|<secret>");
    let wrong_secret = format!("{id}|{}", "0".repeat(43));
    for token in ["garbage", "", "|", "1|", "999999|abcdef", "-1|x", wrong_secret.as_str()] {
        let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
        assert_error(&r, 401, "unauthenticated");
    }
    // Another scheme, or the token without its scheme.
    let r = reply(
        app.http
            .get(app.url(PATIENTS))
            .header("authorization", format!("Basic {}", app.admin_token))
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(
        app.http
            .get(app.url(PATIENTS))
            .header("authorization", app.admin_token.clone())
            .header("x-branch-id", main.to_string()),
    )
    .await;
    assert_error(&r, 401, "unauthenticated");
    // The genuine token still works.
    let r = list_patients(&app, main, "").await;
    assert_status(&r, 200);
}

#[tokio::test]
async fn login_returns_user_token_and_branches() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()));
    let data = &r.body["data"];
    let user = &data["user"];
    assert_eq!(user["id"], admin);
    assert_eq!(user["username"], "admin");
    assert!(user["name"].as_str().is_some_and(|n| !n.is_empty()), "{user}");
    assert!(user["email"].as_str().is_some_and(|e| e.contains('@')), "{user}");
    assert_eq!(user["default_branch_id"], main);
    assert!(user.get("password_hash").is_none() && user.get("password").is_none(), "{user}");
    let token = data["token"].as_str().expect("token string");
    assert!(token.len() >= 40, "token too short to hold 256 bits: {token}");
    assert_ne!(token, app.admin_token, "every login issues a new token");
    let branches = data["branches"].as_array().expect("branches array");
    let main_entry =
        branches.iter().find(|b| b["code"] == "MAIN").unwrap_or_else(|| panic!("MAIN missing: {branches:?}"));
    assert_eq!(main_entry["id"], main);
    assert!(main_entry["name"].as_str().is_some_and(|n| !n.is_empty()));
    // The token works.
    let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_revokes_the_token_on_every_instance() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    // A second instance on the same registry, as behind a load balancer.
    let state =
        clinic_server::app::prepare(crate::support::test_settings(&app.db.url), &app.db.url).await.unwrap();
    let running = clinic_server::app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let other_base = format!("http://{}", running.addr);
    let on_other = |token: &str| {
        app.http
            .get(format!("{other_base}{PATIENTS}"))
            .bearer_auth(token)
            .header("accept", "application/json")
            .header("x-branch-id", main.to_string())
    };
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    // The second instance has the token cached as valid.
    let warm = reply(on_other(&token)).await;
    let logout = reply(app.request_as(&token, Method::POST, "/api/v1/auth/logout", None)).await;
    let started = std::time::Instant::now();
    let mut after = reply(on_other(&token)).await;
    while after.status == 200 && started.elapsed() < crate::support::SOON {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = reply(on_other(&token)).await;
    }
    let still_valid = reply(on_other(&app.admin_token)).await;
    running.handle.stop_forceful();
    running.task.abort();
    state.shutdown();
    assert_status(&warm, 200);
    assert_status(&logout, 200);
    assert_error(&after, 401, "unauthenticated");
    assert_status(&still_valid, 200); // other tokens keep working there
}

#[tokio::test]
async fn login_is_rate_limited_per_client_ip() {
    // The harness logged in once already: that is the first of three.
    let app = TestApp::spawn_with(|s| s.rate_limit_login = 3).await;
    let r = app.login_reply("admin", "wrong-password").await;
    assert_status(&r, 401);
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_status(&r, 200);
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_error(&r, 429, "rate_limited");
    let retry_after: u64 =
        r.header("retry-after").expect("Retry-After").parse().expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(r.header("x-ratelimit-limit"), Some("3"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    // A client cannot escape the limit by claiming another address: the peer is no trusted proxy.
    let r = reply(
        app.http
            .post(app.url(LOGIN))
            .header("x-forwarded-for", "203.0.113.7")
            .header("x-real-ip", "203.0.113.7")
            .json(&json!({ "username": "admin", "password": crate::support::ADMIN_PASSWORD })),
    )
    .await;
    assert_error(&r, 429, "rate_limited");
    // The API itself is not affected by the login limit.
    let main = app.main_branch().await;
    assert_status(&list_patients(&app, main, "").await, 200);
}

#[tokio::test]
async fn api_requests_are_rate_limited_per_user() {
    let app = TestApp::spawn_with(|s| s.rate_limit_api = 5).await;
    let main = app.main_branch().await;
    for i in 1..=5 {
        let r = list_patients(&app, main, "").await;
        assert_status(&r, 200);
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"), "request {i}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some((5 - i).to_string().as_str()), "request {i}");
    }
    let r = list_patients(&app, main, "").await;
    assert_error(&r, 429, "rate_limited");
    let retry_after: u64 = r.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after));
    assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    // Per user: someone else is not limited by the admin's requests.
    let (_, other) = app.create_user("clerk", &["receptionist"], &[main]).await;
    let r = reply(app.request_as(&other, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200);
}

// ---------------------------------------------------------------------------------------
// Branch context
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branch_route_without_branch_header_is_400_branch_required() {
    let app = TestApp::spawn().await;
    assert_error(&reply(app.request(Method::GET, PATIENTS, None)).await, 400, "branch_required");
    let main = app.main_branch().await;
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[main]).await;
    let r = reply(app.request_as(&nurse, Method::GET, PATIENTS, None)).await;
    assert_error(&r, 400, "branch_required");
    let r = reply(app.request(Method::POST, PATIENTS, None).json(&json!({ "first_name": "A" }))).await;
    assert_error(&r, 400, "branch_required");
    let r = reply(app.request(Method::GET, PATIENTS, None).header("x-branch-id", "")).await;
    assert_error(&r, 400, "branch_required");
}

#[tokio::test]
async fn branch_header_that_is_not_an_id_is_400() {
    let app = TestApp::spawn().await;
    for bad in ["abc", "1.5", "0", "-3", "1; DROP SCHEMA x"] {
        let r = reply(app.request(Method::GET, PATIENTS, None).header("x-branch-id", bad)).await;
        assert_status(&r, 400);
        assert!(r.body["message"].as_str().is_some() && r.body["code"].as_str().is_some(), "{}", r.body);
    }
}

#[tokio::test]
async fn branch_not_granted_and_nonexistent_branch_are_403_alike() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    let (_, nurse) = app.create_user("nurse1", &["nurse"], &[main]).await;
    let r = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200); // granted branch
    let denied = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(other))).await;
    assert_status(&denied, 403);
    assert!(denied.body["message"].as_str().is_some() && denied.body["code"].as_str().is_some());
    let unknown = reply(app.request_as(&nurse, Method::GET, PATIENTS, Some(987_654))).await;
    assert_status(&unknown, 403);
    assert_eq!(unknown.body, denied.body, "unknown and not granted must be indistinguishable");
    let r = reply(app.request(Method::GET, PATIENTS, Some(987_654))).await;
    assert_status(&r, 403); // even the admin
    // Writing there is refused too.
    let r = reply(app.request_as(&nurse, Method::POST, PATIENTS, Some(other)).json(&json!({
        "first_name": "A", "last_name": "B", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_status(&r, 403);
    assert_eq!(list_patients(&app, other, "").await.body["meta"]["total"], 0);
}

#[tokio::test]
async fn archived_branch_is_403() {
    let app = TestApp::spawn().await;
    let branch = app.create_branch("ARCH").await;
    // Served (and cached) while active.
    let r = list_patients(&app, branch, "").await;
    assert_status(&r, 200);
    {
        let client = app.state.registry.get().await.unwrap();
        client.execute("UPDATE branches SET status = 'archived' WHERE id = $1", &[&branch]).await.unwrap();
    }
    clinic_server::notify::Invalidate::invalidate(&*app.state, clinic_server::notify::Topic::Branch(branch))
        .await;
    let r = list_patients(&app, branch, "").await;
    assert_status(&r, 403);
    assert!(r.body["message"].as_str().is_some() && r.body["code"].as_str().is_some(), "{}", r.body);
    // Other branches keep serving.
    let main = app.main_branch().await;
    assert_status(&list_patients(&app, main, "").await, 200);
}

#[tokio::test]
async fn missing_token_takes_precedence_over_missing_branch() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url(PATIENTS))).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", "abc")).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.http.get(app.url(PATIENTS)).header("x-branch-id", "987654")).await;
    assert_error(&r, 401, "unauthenticated");
}

// ---------------------------------------------------------------------------------------
// Permissions
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn cashier_may_read_patients_but_not_write_them() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let (_, cashier) = app.create_user("cash1", &["cashier"], &[main]).await;

    let r = reply(app.request_as(&cashier, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200);
    assert_eq!(r.body["meta"]["total"], 1);
    let r = reply(app.request_as(&cashier, Method::GET, &path, Some(main))).await;
    assert_status(&r, 200);

    let r = reply(app.request_as(&cashier, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "New", "last_name": "One", "birth_date": "1980-01-02", "sex": "male",
    })))
    .await;
    assert_error(&r, 403, "forbidden");
    let r =
        reply(app.request_as(&cashier, Method::PUT, &path, Some(main)).json(&json!({ "first_name": "X" })))
            .await;
    assert_error(&r, 403, "forbidden");
    let r = reply(app.request_as(&cashier, Method::DELETE, &path, Some(main))).await;
    assert_error(&r, 403, "forbidden");

    let r = list_patients(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 1, "nothing was created or deleted");
    assert_eq!(column(&r.body, "first_name"), vec!["Ana"]);
}

#[tokio::test]
async fn receptionist_may_create_patients() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let (_, receptionist) = app.create_user("front1", &["receptionist"], &[main]).await;
    let r = reply(app.request_as(&receptionist, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Walk", "last_name": "In", "birth_date": "1990-03-04", "sex": "male",
    })))
    .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["last_name"], "In");
}
