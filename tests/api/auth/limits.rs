//! The authentication rate limits at their default values, and NUL bytes in bodies.

use super::*;
use crate::support::assert_status;

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
        assert_status(&r, if i % 2 == 0 { 401 } else { 200 });
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"), "login {i}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some((5 - i).to_string().as_str()), "login {i}");
    }
    let r = app.login_reply("admin", crate::support::ADMIN_PASSWORD).await;
    assert_rate_limited(&r, 5);
    assert!(r.body["data"].is_null(), "no token past the limit: {}", r.text);
    // The authenticated API is not limited by it.
    assert_status(&app.profile_as(&app.admin_token).await, 200);
}

#[tokio::test]
async fn password_reset_routes_share_one_bucket_per_ip() {
    let app = TestApp::spawn().await;
    for i in 1..=3u32 {
        let r = post_public(&app, RESET_CODE, json!({ "email": format!("ghost{i}@example.test") })).await;
        assert_status(&r, 200);
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
    assert_status(&app.login_reply("admin", crate::support::ADMIN_PASSWORD).await, 200);
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
    for _ in 1..=5 {
        let r = reply(change(&alice, "not-the-password")).await;
        assert_invalid(&r, &["current_password"]);
        assert_status(&r, 422);
    }
    let r = reply(change(&alice, USER_PASSWORD)).await;
    assert_rate_limited(&r, 5);
    assert_status(&app.login_reply("alice", USER_PASSWORD).await, 200); // the 429 changed nothing
    // Another user is not limited by alice's tries.
    let r = reply(change(&bob, USER_PASSWORD)).await;
    assert_status(&r, 200);
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
    for _ in 1..=5 {
        let r = reply(from("10.0.0.1")).await;
        assert_status(&r, 200);
    }
    assert_rate_limited(&reply(from("10.0.0.1")).await, 5);
    // The proxy appends the address it saw: whatever the client put before it is not believed.
    assert_rate_limited(&reply(from("10.0.0.77, 10.0.0.1")).await, 5);
    let r = reply(from("10.0.0.2")).await;
    assert_status(&r, 200); // another client behind the proxy
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
        assert_status(&r, 200);
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
        assert_status(&r, 200);
        assert_eq!(r.header("x-ratelimit-limit"), Some("1000"), "request {i}");
    }
    let r = reply(app.request(Method::GET, MY_BRANCHES, None)).await;
    assert_status(&r, 200);
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
