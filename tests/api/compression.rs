//! Compressed answers and the bounded line of password hashes.

use std::io::Read;

use reqwest::Method;
use serde_json::json;

use crate::support::*;

/// `path` as the admin in `branch`, sent with `Accept-Encoding: encoding` (or none): the
/// answer with its bytes as they came over the wire.
async fn encoded(app: &TestApp, path: &str, branch: i64, encoding: Option<&str>) -> Reply {
    let mut req = app.request(Method::GET, path, Some(branch));
    if let Some(encoding) = encoding {
        req = req.header("accept-encoding", encoding);
    }
    reply(req).await
}

fn decoded(encoding: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match encoding {
        "gzip" => flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap(),
        "br" => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out).unwrap(),
        "zstd" => zstd::stream::read::Decoder::new(bytes).unwrap().read_to_end(&mut out).unwrap(),
        other => panic!("no decoder for {other}"),
    };
    out
}

#[tokio::test]
async fn a_page_comes_in_the_encoding_the_client_asks_for_and_decodes_to_the_same_bytes() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    for i in 0..30 {
        app.create_patient(branch, &format!("Nguyễn{i}"), "Peña").await;
    }
    let page = "/api/v1/patients?perPage=30";
    let r = encoded(&app, page, branch, None).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-encoding"), None, "no Accept-Encoding: no compression");
    let plain = r.bytes;
    assert!(plain.len() > 1024, "the page is worth compressing: {} bytes", plain.len());

    for wanted in ["zstd", "br", "gzip"] {
        let r = encoded(&app, page, branch, Some(wanted)).await;
        assert_status(&r, 200);
        assert_eq!(r.header("content-encoding"), Some(wanted));
        let wire = r.bytes;
        assert!(wire.len() * 3 < plain.len(), "{wanted}: {} bytes of {}", wire.len(), plain.len());
        assert_eq!(decoded(wanted, &wire), plain, "{wanted} decodes to the same answer");
    }
    // The client's order of preference wins; an encoding refused with q=0 is never used.
    let r = encoded(&app, page, branch, Some("gzip;q=1, zstd;q=0.5")).await;
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let r = encoded(&app, page, branch, Some("zstd;q=0, br;q=0, gzip;q=0")).await;
    assert_eq!(r.header("content-encoding"), None);
}

#[tokio::test]
async fn an_answer_under_one_kilobyte_is_sent_as_it_is() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let id = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let r = encoded(&app, &format!("/api/v1/patients/{id}"), branch, Some("gzip")).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-encoding"), None);
    assert!(r.bytes.len() < 1024);
}

#[tokio::test]
async fn a_login_that_finds_the_hashing_line_full_is_503_busy_hashing_and_the_line_recovers() {
    // One hash at a time, nobody waiting, and a hash slow enough (argon2id, 64 MiB, 4 passes)
    // to be caught running.
    let app = TestApp::spawn_with(|s| {
        s.password_hash_limits = clinic_server::config::HashLimits { concurrency: 1, queue: 0 };
        s.rate_limit_login = 1000;
    })
    .await;
    app.create_user("slow.hash", &["viewer"], &[]).await;
    let password = "user-password-1".to_owned();
    let stored = clinic_server::security::password::Hasher::new(
        clinic_server::config::HashCost { memory_kib: 65_536, iterations: 4 },
        clinic_server::config::HashLimits { concurrency: 1, queue: 0 },
    )
    .unwrap()
    .hash(&password)
    .await
    .unwrap();
    let db = app.state.registry.get().await.unwrap();
    db.execute("UPDATE users SET password_hash = $1 WHERE username = 'slow.hash'", &[&stored]).await.unwrap();

    let first = {
        let http = app.http.clone();
        let url = app.url("/api/v1/auth/login");
        let password = password.clone();
        tokio::spawn(async move {
            reply(http.post(url).json(&json!({ "username": "slow.hash", "password": password }))).await
        })
    };
    while app.state.hasher.queue() == 0 {
        tokio::task::yield_now().await;
    }
    let refused = app.login_reply("slow.hash", &password).await;
    assert_error(&refused, 503, "busy_hashing");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_status(&first.await.unwrap(), 200);
    assert_status(&app.login_reply("slow.hash", &password).await, 200);
}
