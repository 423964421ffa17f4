//! PostgreSQL restarting under write load: no answer is a 500, every acknowledged write is
//! kept, the pools and the invalidation listener recover by themselves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Cluster, Server};
use crate::support::{Reply, assert_status, client, eventually, reply, try_reply};

/// Writers posting patients at once.
const WRITERS: usize = 8;

/// What the writers saw.
#[derive(Default)]
struct Tally {
    /// Ids answered 201.
    created: Vec<i64>,
    /// Status -> how many answers.
    statuses: BTreeMap<u16, usize>,
    /// Answers that were neither 201 nor 503 with `Retry-After`, or requests that failed.
    wrong: Vec<String>,
}

/// Posts patients until `stop`, counting every answer.
async fn write(
    server: Arc<(String, String, i64)>,
    writer: usize,
    stop: Arc<AtomicBool>,
    created: Arc<AtomicUsize>,
) -> Tally {
    let (base, token, branch) = &*server;
    let http = client();
    let mut tally = Tally::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let sent = try_reply(
            http.post(format!("{base}/api/v1/patients"))
                .bearer_auth(token)
                .header("x-branch-id", branch.to_string())
                .header("idempotency-key", format!("w{writer}-{n}"))
                .json(&json!({ "first_name": format!("W{writer}"), "last_name": format!("N{n}"), "birth_date": "1980-01-02", "sex": "female" })),
        )
        .await;
        let Reply { status, headers, body, .. } = match sent {
            Ok(answer) => answer,
            Err(e) => {
                tally.wrong.push(format!("request failed: {e}"));
                continue;
            }
        };
        let retry_after = headers.get("retry-after").is_some();
        *tally.statuses.entry(status).or_default() += 1;
        match status {
            201 => {
                tally.created.push(body["data"]["id"].as_i64().expect("a created id"));
                created.fetch_add(1, Ordering::Relaxed);
            }
            503 if retry_after && body["code"].is_string() => {}
            _ => {
                if tally.wrong.is_empty() {
                    eprintln!("writer {writer}: {status} (retry-after: {retry_after}): {body}");
                }
                tally.wrong.push(format!("{status} (retry-after: {retry_after}): {body}"))
            }
        }
    }
    tally
}

#[tokio::test]
async fn a_postgres_restart_under_writes_is_503_never_500_and_loses_nothing() {
    let cluster = Cluster::start().await;
    let server = Server::start(&cluster.url, |_| {}).await;
    let branch = server.main_branch().await;
    let target = Arc::new((server.base.clone(), server.admin_token.clone(), branch));
    let (stop, created) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let writers: Vec<_> =
        (0..WRITERS).map(|w| tokio::spawn(write(target.clone(), w, stop.clone(), created.clone()))).collect();

    // Writes go through, then PostgreSQL restarts under them.
    eventually(Duration::from_secs(30), "writes before the restart", async || {
        created.load(Ordering::Relaxed) >= 40
    })
    .await;
    let restarted_at = Instant::now();
    cluster.pg().restart().await.expect("pg_ctl restart -m fast");
    let before = created.load(Ordering::Relaxed);
    // The pools recover by themselves: writes are acknowledged again.
    eventually(Duration::from_secs(30), "writes after the restart", async || {
        created.load(Ordering::Relaxed) >= before + 40
    })
    .await;
    let recovered_in = restarted_at.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut tally = Tally::default();
    for writer in writers {
        let t = writer.await.unwrap();
        tally.created.extend(t.created);
        tally.wrong.extend(t.wrong);
        for (status, n) in t.statuses {
            *tally.statuses.entry(status).or_default() += n;
        }
    }
    eprintln!(
        "answers: {:?}; writes acknowledged again {recovered_in:?} after the restart began",
        tally.statuses
    );
    assert!(tally.wrong.is_empty(), "answers other than 201 or 503 with Retry-After: {:#?}", tally.wrong);
    assert!(!tally.statuses.contains_key(&500));

    // Every acknowledged write is in the database.
    let client = clinic_server::db::connect(&cluster.url).await.unwrap();
    let found: i64 = client
        .query_one("SELECT count(*) FROM branch_1.patients WHERE id = ANY($1)", &[&tally.created])
        .await
        .unwrap()
        .get(0);
    assert_eq!(found as usize, tally.created.len(), "acknowledged writes missing");

    // The invalidation listener reconnected: a token revoked elsewhere (another instance's
    // transaction, with its notification) is refused here, though this instance cached it.
    eventually(Duration::from_secs(30), "the listener reconnects", async || {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'clinic-server-listener'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    })
    .await;
    let token = server.login().await;
    let me = |token: String| reply(server.http.get(server.url("/api/v1/auth/profile")).bearer_auth(token));
    assert_status(&me(token.clone()).await, 200);
    let token_id: i64 = token.split('|').next().unwrap().parse().unwrap();
    let mut client = client;
    let tx = client.transaction().await.unwrap();
    tx.execute("DELETE FROM api_tokens WHERE id = $1", &[&token_id]).await.unwrap();
    tx.execute("SELECT pg_notify($1, $2)", &[&clinic_server::notify::CHANNEL, &format!("token:{token_id}")])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    eventually(Duration::from_secs(10), "the revoked token is refused", async || {
        me(token.clone()).await.status == 401
    })
    .await;

    // With PostgreSQL gone, the server is alive but not ready, and answers 503, not 500.
    cluster.pg().stop().await;
    let get = |path: &'static str| reply(server.http.get(server.url(path)));
    eventually(Duration::from_secs(10), "readiness says 503", async || {
        get("/api/v1/public/ready").await.status == 503
    })
    .await;
    assert_status(&get("/api/v1/public/live").await, 200);
    let r = reply(
        server
            .http
            .post(server.url("/api/v1/patients"))
            .bearer_auth(&server.admin_token)
            .header("x-branch-id", branch.to_string())
            .json(&json!({ "first_name": "Late", "last_name": "Writer", "birth_date": "1980-01-02", "sex": "female" })),
    )
    .await;
    assert_status(&r, 503);
    assert!(r.header("retry-after").is_some());
}
