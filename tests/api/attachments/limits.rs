//! What a chart and a branch keep: a file past `ATTACHMENT_MAX_BYTES` is 413, the same bytes
//! twice for one patient are one record, and a branch's quota holds under concurrent uploads.

use super::{File, attachments, picture, png, upload};
use crate::support::{Clinic, TestApp, assert_error, assert_status, id_of, ids};

/// Bytes kept by the branch's store, counted in its database.
async fn kept_bytes(app: &TestApp, branch: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    let sql = format!("SELECT coalesce(sum(bytes), 0)::bigint FROM branch_{branch}.attachment_blobs");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

async fn chunk_rows(app: &TestApp, branch: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    let sql = format!("SELECT count(*) FROM branch_{branch}.attachment_chunks");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_file_past_the_bound_is_413_and_leaves_nothing() {
    let clinic = Clinic::open_with(|s| s.attachment_max_bytes = 64 * 1024).await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let big = File { bytes: png(300, 300), sent_as: "image/png", name: "big.png" };
    assert!(big.bytes.len() > 64 * 1024);
    assert_error(&upload(app, branch, patient, &big).await, 413, "payload_too_large");
    let fits = File { bytes: png(20, 20), sent_as: "image/png", name: "small.png" };
    assert_status(&upload(app, branch, patient, &fits).await, 201);
    assert_eq!(kept_bytes(app, branch).await, fits.bytes.len() as i64);
}

#[tokio::test]
async fn the_same_content_twice_is_one_record_and_one_blob() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(40, 40), sent_as: "image/png", name: "first.png" };
    let first = upload(app, branch, patient, &file).await;
    assert_status(&first, 201);
    let again = File { bytes: file.bytes.clone(), sent_as: "application/octet-stream", name: "again.png" };
    let second = upload(app, branch, patient, &again).await;
    assert_status(&second, 200);
    assert_eq!(id_of(&second), id_of(&first));
    assert_eq!(second.body["data"]["filename"], "first.png");
    let listed = app.get(&attachments(patient), Some(branch)).await;
    assert_eq!(ids(&listed.body), vec![id_of(&first)]);
    // Another patient's chart gets its own record over the same kept bytes.
    let other = id_of(&app.create_patient(branch, "Ben", "Santos").await);
    assert_status(&upload(app, branch, other, &file).await, 201);
    assert_eq!(kept_bytes(app, branch).await, file.bytes.len() as i64);
    assert_eq!(chunk_rows(app, branch).await, 1);
}

#[tokio::test]
async fn concurrent_uploads_never_pass_the_branch_quota() {
    let file_bytes = picture(120, 120, image::ImageFormat::Png);
    let size = file_bytes.len() as u64;
    // Room for three of the ten.
    let quota = size * 3 + size / 2;
    let clinic = Clinic::open_with(|s| s.attachment_branch_quota_bytes = Some(quota)).await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let files: Vec<File> = (0..10u32)
        .map(|i| {
            let mut bytes = picture(120, 120, image::ImageFormat::Png);
            // Ten different contents of one size: a byte after the PNG's end differs.
            bytes.push(i as u8);
            File { bytes, sent_as: "image/png", name: "one.png" }
        })
        .collect();
    let replies = futures_util::future::join_all(files.iter().map(|f| upload(app, branch, patient, f))).await;
    let kept = replies.iter().filter(|r| r.status == 201).count();
    for r in replies.iter().filter(|r| r.status != 201) {
        assert_error(r, 413, "quota_exceeded");
    }
    assert_eq!(kept, 3, "three fit the quota");
    assert!(kept_bytes(app, branch).await as u64 <= quota);
    let listed = app.get(&attachments(patient), Some(branch)).await;
    assert_eq!(ids(&listed.body).len(), 3);
}
