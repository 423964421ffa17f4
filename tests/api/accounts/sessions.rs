//! `GET /auth/sessions`, `DELETE /auth/sessions/{id}`, `POST /auth/logout-all`, and tokens
//! ending when idle.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use crate::support::sse::{self, EventStream};
use crate::support::{ADMIN_PASSWORD, TestApp, assert_error, assert_status, reply};

const SESSIONS: &str = "/api/v1/auth/sessions";

/// Logs in as the admin with this User-Agent; the token and its session id.
async fn sign_in(app: &TestApp, user_agent: &str) -> (String, i64) {
    let r = reply(
        app.http
            .post(app.url("/api/v1/auth/login"))
            .header("user-agent", user_agent)
            .json(&serde_json::json!({ "username": "admin", "password": ADMIN_PASSWORD })),
    )
    .await;
    assert_status(&r, 200);
    let token = r.body["data"]["token"].as_str().unwrap().to_owned();
    let id = token.split_once('|').unwrap().0.parse().unwrap();
    (token, id)
}

async fn sessions(app: &TestApp, token: &str) -> Vec<Value> {
    let r = reply(app.request_as(token, Method::GET, SESSIONS, None)).await;
    assert_status(&r, 200);
    r.body["data"].as_array().unwrap().clone()
}

fn ids(sessions: &[Value]) -> Vec<i64> {
    let mut ids: Vec<i64> = sessions.iter().map(|s| s["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn sessions_list_the_callers_live_tokens_and_mark_the_current_one() {
    let app = TestApp::spawn().await;
    let (desk, desk_id) = sign_in(&app, "Front desk/1.0").await;
    let (_tablet, tablet_id) = sign_in(&app, "Tablet/2.0").await;
    let spawned_id: i64 = app.admin_token.split_once('|').unwrap().0.parse().unwrap();
    let listed = sessions(&app, &desk).await;
    assert_eq!(ids(&listed), vec![spawned_id, desk_id, tablet_id]);
    let current: Vec<i64> =
        listed.iter().filter(|s| s["current"] == true).map(|s| s["id"].as_i64().unwrap()).collect();
    assert_eq!(current, vec![desk_id]);
    let tablet = listed.iter().find(|s| s["id"] == tablet_id).unwrap();
    assert_eq!(tablet["user_agent"], "Tablet/2.0");
    assert_eq!(tablet["ip"], "127.0.0.1");
    assert!(tablet["created_at"].is_string() && tablet["last_used_at"].is_string(), "{tablet}");
    // Another user sees only their own.
    let (_, nurse) = app.create_user("nurse", &[], &[]).await;
    let theirs = sessions(&app, &nurse).await;
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0]["current"], true);
}

#[tokio::test]
async fn a_session_ends_by_its_id_and_only_the_owner_can_end_it() {
    let app = TestApp::spawn().await;
    let (desk, _) = sign_in(&app, "desk").await;
    let (tablet, tablet_id) = sign_in(&app, "tablet").await;
    let (_, nurse) = app.create_user("nurse", &[], &[]).await;
    // Another user's session is no session of theirs: 404, and it goes on.
    let path = format!("{SESSIONS}/{tablet_id}");
    let r = reply(app.request_as(&nurse, Method::DELETE, &path, None)).await;
    assert_error(&r, 404, "not_found");
    assert_status(&app.profile_as(&tablet).await, 200);
    let r = reply(app.request_as(&desk, Method::DELETE, &path, None)).await;
    assert_status(&r, 200);
    assert_status(&app.profile_as(&tablet).await, 401);
    assert_status(&app.profile_as(&desk).await, 200);
    let again = reply(app.request_as(&desk, Method::DELETE, &path, None)).await;
    assert_error(&again, 404, "not_found");
    let audited: i64 = app.audit_count(None, Some("session_end")).await;
    assert_eq!(audited, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_all_ends_every_other_session_on_every_instance_and_replays() {
    let app = TestApp::spawn().await;
    // A second instance on the same registry, which has the tokens cached as valid.
    let state =
        clinic_server::app::prepare(crate::support::test_settings(&app.db.url), &app.db.url).await.unwrap();
    let running = clinic_server::app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let other = format!("http://{}/api/v1/auth/profile", running.addr);
    let on_other = |token: &str| app.http.get(&other).bearer_auth(token).header("accept", "application/json");
    let (desk, _) = sign_in(&app, "desk").await;
    let (tablet, _) = sign_in(&app, "tablet").await;
    let warm = reply(on_other(&tablet)).await.status;
    let logout_all = || {
        app.request_as(&desk, Method::POST, "/api/v1/auth/logout-all", None)
            .header("idempotency-key", "end-them")
    };
    let first = reply(logout_all()).await;
    let replayed = reply(logout_all()).await;
    let started = Instant::now();
    let mut there = reply(on_other(&tablet)).await.status;
    while there == 200 && started.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        there = reply(on_other(&tablet)).await.status;
    }
    let desk_there = reply(on_other(&desk)).await.status;
    running.handle.stop_forceful();
    running.task.abort();
    state.shutdown();
    assert_eq!(warm, 200);
    assert_status(&first, 200);
    assert_eq!(first.body["data"]["ended"], 2, "the spawned session and the tablet's");
    assert_eq!(replayed.body, first.body, "the same answer under the same key");
    assert_eq!(there, 401, "the other instance dropped the tablet's token");
    assert_eq!(desk_there, 200, "the current session goes on everywhere");
    assert_status(&app.profile_as(&app.admin_token).await, 401);
    assert_eq!(sessions(&app, &desk).await.len(), 1);
    assert_eq!(app.audit_count(None, Some("logout_all")).await, 1, "a replay writes nothing");
}

#[tokio::test]
async fn a_token_unused_past_the_idle_limit_ends_and_one_in_use_does_not() {
    let app = TestApp::spawn_with(|s| s.token_idle = Some(Duration::from_secs(600))).await;
    let (desk, desk_id) = sign_in(&app, "desk").await;
    let (tablet, tablet_id) = sign_in(&app, "tablet").await;
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    // The tablet was last used eleven minutes ago, as another instance may have recorded.
    client
        .execute(
            "UPDATE api_tokens SET last_used_at = now() - interval '11 minutes' WHERE id = $1",
            &[&tablet_id],
        )
        .await
        .unwrap();
    app.state.auth.forget_token(tablet_id).await;
    let listed = ids(&sessions(&app, &desk).await);
    assert!(listed.contains(&desk_id) && !listed.contains(&tablet_id), "{listed:?}");
    let r = reply(app.request_as(&tablet, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    let left: i64 = client
        .query_one("SELECT count(*) FROM api_tokens WHERE id = $1", &[&tablet_id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "an idle token is deleted, so no later setting revives it");
    assert_eq!(app.audit_count(None, Some("session_idle_end")).await, 1);
    // Used nine minutes ago by this account: still in use, and its use is recorded anew.
    client
        .execute(
            "UPDATE api_tokens SET last_used_at = now() - interval '9 minutes' WHERE id = $1",
            &[&desk_id],
        )
        .await
        .unwrap();
    app.state.auth.forget_token(desk_id).await;
    assert_status(&app.profile_as(&desk).await, 200);
    let started = Instant::now();
    loop {
        let recent: bool = client
            .query_one(
                "SELECT last_used_at > now() - interval '1 minute' FROM api_tokens WHERE id = $1",
                &[&desk_id],
            )
            .await
            .unwrap()
            .get(0);
        if recent {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the use was not recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A front-desk user's waiting-room stream of a new service of MAIN, past its snapshot; the
/// user's token.
async fn open_display(app: &TestApp) -> (EventStream, String) {
    let branch = app.main_branch().await;
    let service = crate::queue::service(app, branch, "R").await;
    let (_, token) = app.create_user("frontdesk", &["receptionist"], &[branch]).await;
    let req = app
        .http
        .get(app.url(&format!("/api/v1/queue/branch-services/{service}/events")))
        .bearer_auth(&token)
        .header("x-branch-id", branch)
        .header("accept", "text/event-stream");
    let mut events = sse::open(req).await.stream();
    assert_eq!(events.next_any().await.unwrap().0, "snapshot");
    (events, token)
}

#[tokio::test]
async fn a_display_ends_with_its_session() {
    let app = TestApp::spawn().await;
    let (mut display, token) = open_display(&app).await;
    let (desk, _) = sign_in_as(&app, "frontdesk", "user-password-1").await;
    let id: i64 = token.split_once('|').unwrap().0.parse().unwrap();
    let r = reply(app.request_as(&desk, Method::DELETE, &format!("{SESSIONS}/{id}"), None)).await;
    assert_status(&r, 200);
    let ended =
        tokio::time::timeout(Duration::from_secs(10), display.next_any()).await.expect("an end event");
    assert_eq!(ended, Some(("end".into(), serde_json::json!({ "reason": "access_ended" }))));
}

#[tokio::test]
async fn an_open_display_keeps_its_token_from_going_idle() {
    let app = TestApp::spawn_with(|s| s.token_idle = Some(Duration::from_secs(2))).await;
    let (mut display, token) = open_display(&app).await;
    // Past the idle limit with nothing but the open stream.
    let quiet = tokio::time::timeout(Duration::from_secs(3), display.next_any()).await;
    assert!(quiet.is_err(), "the stream ended: {:?}", quiet.ok());
    assert_status(&app.profile_as(&token).await, 200); // the stream kept its token in use
}

async fn sign_in_as(app: &TestApp, username: &str, password: &str) -> (String, i64) {
    let token = app.login(username, password).await;
    let id = token.split_once('|').unwrap().0.parse().unwrap();
    (token, id)
}
