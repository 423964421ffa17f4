//! The waiting-room screen: display keys (made, listed, renamed, revoked by administrators,
//! stored hashed), the stream a key opens (its own service only, ticket numbers only, ended
//! on every instance by a revocation) and the page (self-contained, under a strict policy).
//! `browser` drives the page in headless Chromium.

mod browser;

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::queue::{move_ticket, service, ticket};
use crate::support::sse::{self, EventStream};
use crate::support::{
    Reply, SOON, TestApp, assert_error, assert_invalid, assert_status, client, id_of, reply, within,
};

fn keys_of(service: i64) -> String {
    format!("/api/v1/branch-services/{service}/display-keys")
}

/// A new key of `service`, as its create answers it (secret included).
pub async fn make_key(app: &TestApp, service: i64, name: &str) -> Value {
    app.created(&keys_of(service), None, json!({ "name": name })).await
}

/// The stream of a screen of `service` on the server at `base`, shown `key`.
async fn stream_at(base: &str, service: i64, key: &str) -> sse::Opened {
    let req = client()
        .get(format!("{base}/display/{service}/events"))
        .header("x-display-key", key)
        .header("accept", "text/event-stream");
    sse::open(req).await
}

/// A screen's stream, open, past its first board.
async fn open_screen(app: &TestApp, service: i64, key: &str) -> (EventStream, Value) {
    let mut events = stream_at(&app.base, service, key).await.stream();
    let first = events.next_named("board").await;
    (events, first)
}

/// The answer refusing a screen's stream.
async fn stream_refusal(app: &TestApp, service: i64, key: &str) -> Reply {
    stream_at(&app.base, service, key).await.refused()
}

#[tokio::test]
async fn a_key_is_shown_once_stored_hashed_listed_renamed_and_revoked() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let created = app.post(&keys_of(reception), None, json!({ "name": "Lobby, left" })).await;
    assert_status(&created, 201);
    let key = created.body["data"].clone();
    let secret = key["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("dk_") && secret.len() == 67, "{secret}");
    assert_eq!(key["url"], format!("{}/display/{reception}#key={secret}", app.base));
    assert_eq!(key["branch_service_id"], reception);
    assert_eq!(key["name"], "Lobby, left");
    assert_eq!(key["created_by"], app.admin_id().await);
    assert!(key["revoked_at"].is_null() && key["last_used_at"].is_null(), "{key}");
    assert!(key.get("secret_hash").is_none(), "{key}");
    let id = id_of(&created);
    assert_eq!(created.header("location"), Some(format!("{}/{id}", keys_of(reception)).as_str()));

    // Only the hash is kept: not in the row, the audit trail or the idempotency store.
    let db = clinic_server::db::connect(&app.db.url).await.unwrap();
    let hash: Vec<u8> =
        db.query_one("SELECT secret_hash FROM display_keys WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(hash, Sha256::digest(secret.as_bytes()).to_vec());
    let hex_part = &secret[3..];
    for (table, text) in
        [("audit_log", "a::text"), ("idempotency_keys", "a::text"), ("display_keys", "a::text")]
    {
        let found: i64 = db
            .query_one(&format!("SELECT count(*) FROM {table} a WHERE strpos({text}, $1) > 0"), &[&hex_part])
            .await
            .unwrap()
            .get(0);
        assert_eq!(found, 0, "the secret is stored in {table}");
    }

    // Listed and read without the secret.
    let listed = app.get(&keys_of(reception), None).await;
    assert_status(&listed, 200);
    assert_eq!(listed.body["meta"]["total"], 1);
    assert!(!listed.text.contains(hex_part), "{}", listed.text);
    let got = app.get(&format!("{}/{id}", keys_of(reception)), None).await;
    assert!(got.body["data"].get("key").is_none() && !got.text.contains(hex_part), "{}", got.text);

    // Renamed, then revoked: kept, and listed by state.
    let renamed = app.put(&format!("{}/{id}", keys_of(reception)), None, json!({ "name": "Lobby" })).await;
    assert_status(&renamed, 200);
    let revoked = app.delete(&format!("{}/{id}", keys_of(reception)), None).await;
    assert_status(&revoked, 200);
    assert_eq!(revoked.body["message"], "Display key revoked.");
    let got = app.get(&format!("{}/{id}", keys_of(reception)), None).await;
    assert!(got.body["data"]["revoked_at"].is_string(), "{}", got.text);
    let live = app.get(&format!("{}?filters[revoked]=false", keys_of(reception)), None).await;
    assert_eq!(live.body["meta"]["total"], 0, "{}", live.text);
    let gone = app.get(&format!("{}?filters[revoked]=true", keys_of(reception)), None).await;
    assert_eq!(gone.body["meta"]["total"], 1, "{}", gone.text);
    let trail: Vec<String> = app
        .audit_rows("/api/v1/system-audit-logs", None, "branch-services/{branch_service_id}/display-keys", id)
        .await
        .iter()
        .map(|row| row["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(trail, ["create", "update", "revoke"]);
}

#[tokio::test]
async fn keys_are_for_administrators_of_live_services() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let (_, clerk) = app.create_user("frontdesk", &["receptionist"], &[branch]).await;
    let r = app.call_as(&clerk, Method::POST, &keys_of(reception), None, json!({ "name": "x" })).await;
    assert_error(&r, 403, "forbidden");
    let r = app.call_as(&clerk, Method::GET, &keys_of(reception), None, Value::Null).await;
    assert_error(&r, 403, "forbidden");
    assert_error(&app.post(&keys_of(999_999), None, json!({ "name": "x" })).await, 404, "not_found");
    assert_error(&app.get(&keys_of(999_999), None).await, 404, "not_found");
    assert_invalid(&app.post(&keys_of(reception), None, json!({})).await, &["name"]);
    assert_invalid(&app.post(&keys_of(reception), None, json!({ "name": "x".repeat(101) })).await, &["name"]);
}

#[tokio::test]
async fn a_key_opens_its_own_services_stream_and_nothing_else() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let (reception, cashier) = (service(&app, branch, "R").await, service(&app, branch, "C").await);
    let key = make_key(&app, reception, "Lobby").await;
    let secret = key["key"].as_str().unwrap();
    let (screen, board) = open_screen(&app, reception, secret).await;
    assert_eq!(board["service"], json!({ "code": "R", "name": "Service R" }));
    drop(screen);

    // Another service's screen: the key is known, but not for it.
    assert_error(&stream_refusal(&app, cashier, secret).await, 403, "display_forbidden");
    // Nothing, something malformed, a made-up key, a user's token: not a display key.
    for presented in ["", "dk_123", &format!("dk_{}", "0".repeat(64)), app.admin_token.as_str()] {
        assert_error(&stream_refusal(&app, reception, presented).await, 401, "unauthenticated");
    }
    // The key is no token: the API does not take it, nor the users' stream.
    let r = reply(app.http.get(app.url("/api/v1/auth/profile")).bearer_auth(secret)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(
        app.http
            .get(app.url(&format!("/api/v1/queue/branch-services/{reception}/events")))
            .bearer_auth(secret)
            .header("x-branch-id", branch)
            .header("x-display-key", secret),
    )
    .await;
    assert_error(&r, 401, "unauthenticated");
    // A revoked key opens nothing.
    assert_status(&app.delete(&format!("{}/{}", keys_of(reception), id_of(&key)), None).await, 200);
    assert_error(&stream_refusal(&app, reception, secret).await, 401, "unauthenticated");
    // Its use was noted.
    let got = app.get(&format!("{}/{}", keys_of(reception), id_of(&key)), None).await;
    assert!(got.body["data"]["last_used_at"].is_string(), "{}", got.text);
}

/// Made-up keys count against the caller's address like made-up tokens.
#[tokio::test]
async fn guessing_keys_is_limited_per_address() {
    let app = TestApp::spawn_with(|s| s.rate_limit_bad_token = 3).await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let key = make_key(&app, reception, "Lobby").await;
    for n in 0..3 {
        let guess = format!("dk_{n:064}");
        assert_error(&stream_refusal(&app, reception, &guess).await, 401, "unauthenticated");
    }
    let refused = stream_refusal(&app, reception, key["key"].as_str().unwrap()).await;
    assert_error(&refused, 429, "rate_limited");
}

/// Every key that may appear in what a screen is sent.
const SHOWN_FIELDS: &[&str] = &[
    "service",
    "code",
    "name",
    "timezone",
    "date",
    "serving",
    "waiting",
    "waiting_total",
    "called",
    "number",
    "counter",
    "status",
    "reason",
];

/// Every object key in `value`, at any depth.
fn fields_of(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                found.push(key.clone());
                fields_of(inner, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| fields_of(item, found)),
        _ => {}
    }
}

#[tokio::test]
async fn a_screen_is_sent_ticket_numbers_counters_and_statuses_only() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let patient = app.create_patient(branch, "Zelda", "Quintero").await;
    let pin = patient["pin"].as_str().unwrap().to_owned();
    let visit = app
        .created(
            "/api/v1/patient-visits",
            Some(branch),
            json!({ "patient_id": id_of(&patient), "visit_date": "2026-01-05" }),
        )
        .await;
    let held = ticket(&app, branch, reception, json!({ "patient_visit_id": id_of(&visit) })).await;
    let urgent = ticket(&app, branch, reception, json!({ "priority": "urgent" })).await;
    let key = make_key(&app, reception, "Lobby").await;
    let (mut screen, first) = open_screen(&app, reception, key["key"].as_str().unwrap()).await;
    let numbers = |list: &Value| -> Vec<String> {
        list.as_array().unwrap().iter().map(|t| t["number"].as_str().unwrap().to_owned()).collect()
    };
    // The urgent ticket waits first; nothing is being served yet.
    assert_eq!(numbers(&first["waiting"]), ["R-002", "R-001"], "{first}");
    assert_eq!(first["serving"], json!([]));
    assert_eq!(first["waiting_total"], 2);

    assert_status(&move_ticket(&app, branch, id_of(&held), "call", 0).await, 200);
    // The board of each change, until the one that announces the call (the tickets' own
    // issuing may reach the screen first: a board that already has them changes nothing).
    let mut boards = vec![first];
    let called = within(SOON, "the call reaches the screen", async {
        loop {
            let board = screen.next_named("board").await;
            boards.push(board.clone());
            if !board["called"].is_null() {
                return board;
            }
        }
    })
    .await;
    assert_eq!(called["called"], json!({ "number": "R-001", "counter": "Window 2", "status": "called" }));
    assert_eq!(called["serving"], json!([{ "number": "R-001", "counter": "Window 2", "status": "called" }]));
    assert_eq!(numbers(&called["waiting"]), ["R-002"]);
    assert_status(&move_ticket(&app, branch, id_of(&held), "serve", 0).await, 200);
    let served = screen.next_named("board").await;
    assert_eq!(served["serving"][0]["status"], "serving", "{served}");
    assert!(served["called"].is_null(), "serving is no new call: {served}");
    assert_status(&move_ticket(&app, branch, id_of(&urgent), "no-show", 0).await, 200);
    boards.push(served);
    boards.push(screen.next_named("board").await);

    let mut fields = Vec::new();
    boards.iter().for_each(|b| fields_of(b, &mut fields));
    let unexpected: Vec<&String> = fields.iter().filter(|f| !SHOWN_FIELDS.contains(&f.as_str())).collect();
    assert!(unexpected.is_empty(), "a screen was sent {unexpected:?}");
    for private in ["Zelda", "Quintero", &pin, "patient", "priority", "urgent"] {
        assert!(!screen.raw.contains(private), "a screen was sent {private:?}: {}", screen.raw);
    }
}

/// Many clerks at once: tickets issued and moved concurrently, some the same ticket twice.
/// However the changes reach the screen (a ticket's events may arrive out of order), its
/// board ends as the board a screen opened afterwards reads from the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screen_keeps_up_with_concurrent_moves() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let key = make_key(&app, reception, "Lobby").await;
    let secret = key["key"].as_str().unwrap();
    let (mut screen, _) = open_screen(&app, reception, secret).await;
    let issued = join_all((0..24).map(|n| {
        let priority = ["normal", "priority", "urgent"][n % 3];
        ticket(&app, branch, reception, json!({ "priority": priority }))
    }))
    .await;
    let ids: Vec<i64> = issued.iter().map(id_of).collect();
    // Every third ticket called twice at once, then some served, others skipped or absent.
    let calls = ids.iter().step_by(3).flat_map(|id| [*id, *id]).chain(ids.iter().skip(1).step_by(3).copied());
    let answers = join_all(calls.map(|id| move_ticket(&app, branch, id, "call", 0))).await;
    answers.iter().for_each(|r| assert_status(r, 200));
    let moves = ids
        .iter()
        .step_by(3)
        .map(|id| (*id, "serve"))
        .chain(ids.iter().skip(1).step_by(6).map(|id| (*id, "skip")));
    let moves = moves.chain(ids.iter().skip(2).step_by(6).map(|id| (*id, "no-show")));
    let answers = join_all(moves.map(|(id, verb)| move_ticket(&app, branch, id, verb, 0))).await;
    answers.iter().for_each(|r| assert_status(r, 200));

    let (_, truth) = open_screen(&app, reception, secret).await;
    assert_eq!(truth["serving"].as_array().unwrap().len(), 8, "{truth}");
    assert!(truth["waiting_total"].as_u64().unwrap() > 0, "{truth}");
    let shown = |board: &Value| json!([board["serving"], board["waiting"], board["waiting_total"]]);
    within(SOON, &format!("the screen shows what the queue holds: {truth}"), async {
        while shown(&screen.next_named("board").await) != shown(&truth) {}
    })
    .await;
}

/// A ticket's changes are published after their commits, so an older one may arrive last
/// (or after a snapshot that has the newer): it must not undo what the screen shows.
#[tokio::test]
async fn a_late_change_does_not_undo_a_newer_one() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let issued = ticket(&app, branch, reception, json!({})).await;
    assert_status(&move_ticket(&app, branch, id_of(&issued), "call", 0).await, 200);
    let key = make_key(&app, reception, "Lobby").await;
    let (mut screen, first) = open_screen(&app, reception, key["key"].as_str().unwrap()).await;
    assert_eq!(first["serving"][0]["number"], "R-001", "{first}");
    // The ticket as it was issued, heard now.
    let late = clinic_server::state::Event { topic: format!("queue:{branch}:{reception}"), data: issued };
    app.state.events.send(late).unwrap();
    ticket(&app, branch, reception, json!({})).await;
    let next = screen.next_named("board").await;
    assert_eq!(next["serving"], first["serving"], "{next}");
    assert_eq!(next["waiting"], json!([{ "number": "R-002", "status": "waiting" }]), "{next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_key_ends_its_screens_on_every_instance() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let reception = service(&app, branch, "R").await;
    let (lobby, corridor) =
        (make_key(&app, reception, "Lobby").await, make_key(&app, reception, "Corridor").await);
    // A second instance on the same registry, as behind a load balancer.
    let state =
        clinic_server::app::prepare(crate::support::test_settings(&app.db.url), &app.db.url).await.unwrap();
    let running = clinic_server::app::spawn(state.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    let other = format!("http://{}", running.addr);
    let open_there = |key: &Value| {
        let key = key["key"].as_str().unwrap().to_owned();
        let other = other.clone();
        async move {
            let mut events = stream_at(&other, reception, &key).await.stream();
            events.next_named("board").await;
            events
        }
    };
    let (mut revoked, mut kept) = (open_there(&lobby).await, open_there(&corridor).await);
    assert_status(&app.delete(&format!("{}/{}", keys_of(reception), id_of(&lobby)), None).await, 200);
    within(SOON, "the revoked key's screen ends", async {
        let (name, data) = revoked.next_any().await.expect("an end event before the close");
        assert_eq!((name.as_str(), &data), ("end", &json!({ "reason": "revoked" })));
        assert!(revoked.next_any().await.is_none(), "the stream closes after end");
    })
    .await;
    // The other key's screen goes on: a call still reaches it.
    let id = id_of(&ticket(&app, branch, reception, json!({})).await);
    assert_status(&move_ticket(&app, branch, id, "call", 0).await, 200);
    let call = within(SOON, "the other screen goes on", async {
        loop {
            let board = kept.next_named("board").await;
            if !board["called"].is_null() {
                return board;
            }
        }
    })
    .await;
    running.handle.stop_forceful();
    running.task.abort();
    state.shutdown();
    assert_eq!(call["called"]["number"], "R-001");
}

#[tokio::test]
async fn the_page_is_self_contained_under_a_strict_policy() {
    let app = TestApp::spawn().await;
    let r = reply(app.http.get(app.url("/display/7")).header("accept", "text/html")).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    let policy = r.header("content-security-policy").expect("a policy").to_owned();
    assert!(policy.starts_with("default-src 'none';"), "{policy}");
    assert!(policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(!policy.contains("unsafe"), "{policy}");
    // The policy allows exactly the page's own inline script and style.
    let inline = |tag: &str| {
        let start = r.text.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
        let end = start + r.text[start..].find(&format!("</{tag}>")).unwrap();
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&r.text[start..end]))
    };
    assert!(policy.contains(&format!("script-src 'sha256-{}'", inline("script"))), "{policy}");
    assert!(policy.contains(&format!("style-src 'sha256-{}'", inline("style"))), "{policy}");
    // Nothing is loaded from anywhere: no address, no import, no url(); `//` only opens the
    // script's comments (an address would follow a quote or a parenthesis).
    for outside in ["http:", "https:", "@import", "url(", "\"//", "'//", "(//"] {
        assert!(!r.text.contains(outside), "the page refers to {outside}");
    }
    // The same page for any service: it tells nothing about which exist.
    let other = reply(app.http.get(app.url("/display/999999"))).await;
    assert_status(&other, 200);
    assert_eq!(other.text, r.text);
    assert_status(&reply(app.http.get(app.url("/display/abc"))).await, 404);
    // A browser asking for JSON only is told the page is HTML.
    let r = reply(app.http.get(app.url("/display/7")).header("accept", "application/json")).await;
    assert_error(&r, 406, "not_acceptable");
}
