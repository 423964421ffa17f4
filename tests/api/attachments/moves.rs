//! Attachments where the chart goes, and nowhere else: an upload cut off halfway keeps
//! nothing, a merge of patients moves the duplicate's files to the patient who stays, and a
//! branch moved to another database server brings its files, byte for byte.

use std::time::Duration;

use clinic_server::tenancy::moving;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{File, attachments, content, png, sha256_hex, upload};
use crate::servers::{SecondServer, spawn_beside};
use crate::support::{Clinic, TestApp, assert_status, id_of, ids};

/// The branch's attachment rows, blobs, chunk rows and kept bytes, counted in its schema on
/// the server `client` reaches.
async fn counts(client: &tokio_postgres::Client, branch: i64) -> (i64, i64, i64, i64) {
    let schema = format!("branch_{branch}");
    let sql = format!(
        "SELECT (SELECT count(*) FROM {schema}.attachments), (SELECT count(*) FROM {schema}.attachment_blobs),
                (SELECT count(*) FROM {schema}.attachment_chunks),
                (SELECT coalesce(sum(bytes), 0)::bigint FROM {schema}.attachment_blobs)"
    );
    let row = client.query_one(&sql, &[]).await.unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

async fn registry_counts(app: &TestApp, branch: i64) -> (i64, i64, i64, i64) {
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    counts(&client, branch).await
}

/// Sends the headers of an upload of `file` (its whole length in Content-Length) and half its
/// bytes, then closes the connection's writing half and reads what comes back until the
/// server closes it.
async fn cut_upload(app: &TestApp, branch: i64, patient: i64, file: &File<'_>) -> Vec<u8> {
    let address = app.base.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nX-Branch-Id: {branch}\r\n\
         Content-Type: {}\r\nContent-Disposition: attachment; filename=\"{}\"\r\nContent-Length: {}\r\n\r\n",
        attachments(patient),
        app.admin_token,
        file.sent_as,
        file.name,
        file.bytes.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&file.bytes[..file.bytes.len() / 2]).await.unwrap();
    stream.flush().await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server never closed the cut connection");
    answer
}

#[tokio::test]
async fn an_upload_cut_off_halfway_keeps_nothing_and_the_server_goes_on() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let first = File { bytes: png(30, 30), sent_as: "image/png", name: "kept.png" };
    assert_status(&upload(app, branch, patient, &first).await, 201);
    let before = registry_counts(app, branch).await;
    // Over two 256 KiB chunks: half of it is more than one.
    let file = File { bytes: png(700, 400), sent_as: "image/png", name: "cut.png" };
    assert!(file.bytes.len() > 600 * 1024, "{}", file.bytes.len());
    for _ in 0..3 {
        let answer = cut_upload(app, branch, patient, &file).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(!answer.starts_with("HTTP/1.1 201") && !answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // The server answers, and the same file sent whole is new: nothing of the cut ones stayed.
    let r = app.get(&attachments(patient), Some(branch)).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body).len(), 1);
    assert_eq!(registry_counts(app, branch).await, before);
    let r = upload(app, branch, patient, &file).await;
    assert_status(&r, 201);
    let chunks = file.bytes.len().div_ceil(256 * 1024) as i64;
    let after = (before.0 + 1, before.1 + 1, before.2 + chunks, before.3 + file.bytes.len() as i64);
    assert_eq!(registry_counts(app, branch).await, after);
    let got = content(app, branch, patient, id_of(&r), "", &[]).await;
    assert_eq!(got.bytes, file.bytes);
}

#[tokio::test]
async fn a_merge_moves_the_duplicates_attachments_to_the_patient_who_stays() {
    let clinic = Clinic::open().await;
    let (app, branch, kept) = (&clinic.app, clinic.branch, clinic.patient);
    let duplicate = id_of(&app.create_patient(branch, "Ana", "Kruz").await);
    let own = File { bytes: png(21, 21), sent_as: "image/png", name: "own.png" };
    let own = id_of(&upload(app, branch, kept, &own).await);
    let scan = File { bytes: png(22, 22), sent_as: "image/png", name: "scan.png" };
    let moved = id_of(&upload(app, branch, duplicate, &scan).await);
    // The same file in both charts: the kept chart holds it once, and the merge goes through.
    let both = File { bytes: png(23, 23), sent_as: "image/png", name: "both.png" };
    let in_kept = id_of(&upload(app, branch, kept, &both).await);
    let left = id_of(&upload(app, branch, duplicate, &both).await);
    let r = app
        .post(
            &format!("/api/v1/patients/{kept}/merge"),
            Some(branch),
            serde_json::json!({ "duplicate_id": duplicate, "reason": "registered twice" }),
        )
        .await;
    assert_status(&r, 201);
    let r = app.get(&attachments(kept), Some(branch)).await;
    assert_status(&r, 200);
    let mut listed = ids(&r.body);
    listed.sort_unstable();
    assert_eq!(listed, vec![own, moved, in_kept]);
    let got = content(app, branch, kept, moved, "", &[]).await;
    assert_status(&got, 200);
    assert_eq!(got.bytes, scan.bytes);
    assert_eq!(got.header("etag"), Some(format!("\"{}\"", sha256_hex(&scan.bytes)).as_str()));
    let client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let sql = format!("SELECT patient_id FROM branch_{branch}.attachments WHERE id = $1");
    let owner: i64 = client.query_one(&sql, &[&moved]).await.unwrap().get(0);
    assert_eq!(owner, kept);
    let owner: i64 = client.query_one(&sql, &[&left]).await.unwrap().get(0);
    assert_eq!(owner, duplicate, "the kept chart's copy of a file was doubled");
}

#[tokio::test]
async fn a_branch_moved_to_another_server_brings_its_files_byte_for_byte() {
    let second = SecondServer::start("attachments").await;
    let app = spawn_beside(&second).await;
    let north = app.create_branch("NORTH").await;
    let patient = id_of(&app.create_patient(north, "Ana", "Cruz").await);
    let wide = File { bytes: png(700, 400), sent_as: "image/png", name: "wide.png" };
    let note =
        File { bytes: b"%PDF-1.4\n% moved\n%%EOF\n".to_vec(), sent_as: "application/pdf", name: "n.pdf" };
    let wide_id = id_of(&upload(&app, north, patient, &wide).await);
    let note_id = id_of(&upload(&app, north, patient, &note).await);
    let before = registry_counts(&app, north).await;

    let moved = moving::move_branch(&app.state.directory, "NORTH", &second.url).await.expect("moved");
    assert!(moved.rows > 0);
    let there = counts(&second.client().await, north).await;
    assert_eq!(there, before, "the attachments' tables came whole");
    for (id, file) in [(wide_id, &wide), (note_id, &note)] {
        let got = content(&app, north, patient, id, "", &[]).await;
        assert_status(&got, 200);
        assert!(got.bytes == file.bytes, "{} bytes back of {}", got.bytes.len(), file.bytes.len());
        assert_eq!(got.header("etag"), Some(format!("\"{}\"", sha256_hex(&file.bytes)).as_str()));
    }
    let client = second.client().await;
    let sql = format!("SELECT sha256 FROM branch_{north}.attachments WHERE id = $1");
    let kept: String = client.query_one(&sql, &[&wide_id]).await.unwrap().get(0);
    assert_eq!(kept, sha256_hex(&wide.bytes));
    // And a file added there is kept there.
    let third = File { bytes: png(33, 33), sent_as: "image/png", name: "there.png" };
    let third_id = id_of(&upload(&app, north, patient, &third).await);
    assert_eq!(content(&app, north, patient, third_id, "", &[]).await.bytes, third.bytes);
    assert_eq!(counts(&client, north).await.0, before.0 + 1);
    drop(client);
    drop(app);
    second.remove().await;
}
