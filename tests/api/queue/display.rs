//! The live display: calls seen as they are made, and a stream that lives only as long as
//! what opened it.

use super::*;

#[tokio::test]
async fn a_display_sees_a_call_as_it_is_made() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let id = id_of(&ticket(&app, branch, reception, json!({})).await);
    let req = app
        .request(Method::GET, &format!("/api/v1/queue/branch-services/{reception}/events"), Some(branch))
        .header("accept", "text/event-stream")
        // A display that accepts compression still gets each event as it is sent.
        .header("accept-encoding", "zstd, br, gzip");
    let mut stream = sse::open(req).await.stream();
    assert!(stream.headers.get("content-encoding").is_none(), "event streams are not compressed");
    let snapshot = stream.next_named("snapshot").await;
    assert_eq!(snapshot["waiting"][0]["id"], id);

    assert_status(&move_ticket(&app, branch, id, "call", 0).await, 200);
    // The ticket's own issuing may still be on its way (heard back from the database after
    // the snapshot was taken): a display sees it first, then the call.
    let call = async {
        loop {
            let event = stream.next_named("ticket").await;
            if event["status"] != "waiting" {
                return event;
            }
        }
    };
    let seen = within(SOON, "the call reaches the display", call).await;
    assert_eq!(seen["id"], id);
    assert_eq!(seen["status"], "called");
}

// ---------------------------------------------------------------------------------------
// A display's stream lives only as long as what opened it
// ---------------------------------------------------------------------------------------

/// A display opened by a front-desk user of the branch.
struct Screen {
    events: EventStream,
}

impl Screen {
    async fn open(app: &TestApp, token: &str, branch: i64, service: i64) -> Self {
        let req = app
            .http
            .get(app.url(&format!("/api/v1/queue/branch-services/{service}/events")))
            .bearer_auth(token)
            .header("x-branch-id", branch)
            .header("accept", "text/event-stream");
        let mut screen = Self { events: sse::open(req).await.stream() };
        screen.next("snapshot").await;
        screen
    }

    /// The next event of any name: `(name, data)`, or `None` when the stream closed.
    async fn any(&mut self) -> Option<(String, Value)> {
        self.events.next_any().await
    }

    async fn next(&mut self, name: &str) -> Value {
        let (got, data) = self.any().await.expect("the stream is open");
        assert_eq!(got, name, "{data}");
        data
    }

    /// The stream says `end` and closes.
    async fn ends(&mut self) {
        within(SOON, "the stream ends", async {
            let (name, data) = self.any().await.expect("an end event before the close");
            assert_eq!(name, "end", "{data}");
            assert!(data["reason"].is_string(), "{data}");
            assert!(data.get("patient_id").is_none());
            assert!(self.any().await.is_none(), "the stream closes after end");
        })
        .await;
    }

    /// Nothing arrives for a moment: the stream goes on.
    async fn goes_on(&mut self) {
        let quiet = tokio::time::timeout(Duration::from_millis(300), self.any()).await;
        assert!(quiet.is_err(), "the stream sent {:?}", quiet.ok());
    }
}

/// A front-desk user with a token, and a service of MAIN.
async fn front_desk(app: &TestApp) -> (i64, i64, String, i64) {
    let branch = app.main_branch().await;
    let service = service(app, branch, "R").await;
    let (user, token) = app.create_user("frontdesk", &["receptionist"], &[branch]).await;
    (branch, service, token, user)
}

#[tokio::test]
async fn a_display_ends_when_its_token_logs_out() {
    let app = TestApp::spawn().await;
    let (branch, service, token, _) = front_desk(&app).await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    // Another user's logout is none of its business.
    let (_, other) = app.create_user("other", &["receptionist"], &[branch]).await;
    let r = app.call_as(&other, Method::POST, "/api/v1/auth/logout", None, json!({})).await;
    assert_status(&r, 200);
    screen.goes_on().await;
    let r = app.call_as(&token, Method::POST, "/api/v1/auth/logout", None, json!({})).await;
    assert_status(&r, 200);
    screen.ends().await;
}

#[tokio::test]
async fn a_display_ends_when_its_user_is_deactivated_or_deleted() {
    let app = TestApp::spawn().await;
    let (branch, service, token, user) = front_desk(&app).await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    assert_status(&app.put(&format!("/api/v1/users/{user}"), None, json!({ "active": false })).await, 200);
    screen.ends().await;

    let (second, token) = app.create_user("second", &["receptionist"], &[branch]).await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    assert_status(&app.delete(&format!("/api/v1/users/{second}"), None).await, 200);
    screen.ends().await;
}

#[tokio::test]
async fn a_display_ends_when_its_user_loses_the_branch_or_the_permission() {
    let app = TestApp::spawn().await;
    let (branch, service, token, user) = front_desk(&app).await;
    let north = app.create_branch("NORTH").await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    let r = app.put(&format!("/api/v1/users/{user}"), None, json!({ "branch_ids": [north] })).await;
    assert_status(&r, 200);
    screen.ends().await;

    let (second, token) = app.create_user("second", &["receptionist"], &[branch]).await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    let client = app.state.registry.get().await.unwrap();
    let pharmacist: i64 =
        client.query_one("SELECT id FROM roles WHERE name = 'pharmacist'", &[]).await.unwrap().get(0);
    let r = app.put(&format!("/api/v1/users/{second}"), None, json!({ "role_ids": [pharmacist] })).await;
    assert_status(&r, 200);
    screen.ends().await;
}

#[tokio::test]
async fn a_display_ends_when_its_token_expires() {
    let app = TestApp::spawn_with(|s| s.token_expiry = Some(Duration::from_secs(2))).await;
    let (branch, service, token, _) = front_desk(&app).await;
    let mut screen = Screen::open(&app, &token, branch, service).await;
    within(SOON, "the stream ends with its token", async {
        let (name, data) = screen.any().await.expect("an end event");
        assert_eq!(name, "end", "{data}");
        assert_eq!(data["reason"], "token_expired");
    })
    .await;
}

/// A display that falls behind gets the whole queue again, as it is now.
#[tokio::test]
async fn a_display_that_falls_behind_gets_a_fresh_snapshot() {
    let app = TestApp::spawn().await;
    let (branch, service, token, _) = front_desk(&app).await;
    let id = id_of(&ticket(&app, branch, service, json!({})).await);
    let mut screen = Screen::open(&app, &token, branch, service).await;
    in_branch(
        &app,
        branch,
        &format!("UPDATE queue_tickets SET status = 'called', called_at = now() WHERE id = {id}"),
    )
    .await;
    // More events than the channel holds, sent before the display's task can run (the
    // server shares this test's single-threaded runtime).
    for n in 0..2000 {
        let noise = clinic_server::state::Event { topic: format!("queue:0:{n}"), data: Value::Null };
        let _ = app.state.events.send(noise);
    }
    let fresh = within(SOON, "a fresh snapshot", screen.next("snapshot")).await;
    assert_eq!(fresh["now_serving"][0]["id"], id, "{fresh}");
    assert_eq!(fresh["now_serving"][0]["status"], "called");
}
