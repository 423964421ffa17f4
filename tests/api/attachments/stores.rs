//! Where the bytes are kept: the branch's database (the default) or an object store
//! (`ATTACHMENT_STORE=file:///...`); either way a branch's backup restored as a new branch
//! reads its files back.

use clinic_server::tenancy::backup;

use super::{File, content, png, upload};
use crate::support::{Clinic, TestApp, assert_status, id_of};

/// A directory of this test process under `var/`, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("var")
            .join(format!("attachments-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Backs the main branch up and restores it as a new branch; answers its id.
async fn restored_copy(app: &TestApp, scratch: &Scratch, code: &str) -> i64 {
    let file = scratch.0.join("main.backup");
    backup::backup(&app.state.directory, "MAIN", &file).await.unwrap();
    let into = backup::RestoreAs { code: Some(code.into()), ..Default::default() };
    backup::restore(&app.state, &file, into, &[app.admin_id().await]).await.unwrap().id
}

async fn chunk_rows(app: &TestApp, branch: i64) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    let sql = format!("SELECT count(*) FROM branch_{branch}.attachment_chunks");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_restored_branch_reads_the_files_kept_in_its_database() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(400, 300), sent_as: "image/png", name: "kept.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    assert!(chunk_rows(app, branch).await > 1, "the file is in chunks");
    let scratch = Scratch::new("database");
    let restored = restored_copy(app, &scratch, "MAINR").await;
    let back = content(app, restored, patient, id, "", &[]).await;
    assert_status(&back, 200);
    assert_eq!(back.bytes, file.bytes);
}

#[tokio::test]
async fn files_go_to_the_object_store_named_and_a_restored_branch_shares_them() {
    let store = Scratch::new("objects");
    let url = format!("file://{}", store.0.display());
    let clinic = Clinic::open_with(|s| s.attachment_store = Some(url)).await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(400, 300), sent_as: "image/png", name: "kept.png" };
    let r = upload(app, branch, patient, &file).await;
    assert_status(&r, 201);
    let id = id_of(&r);
    let sha = r.body["data"]["sha256"].as_str().unwrap().to_owned();
    let object = store.0.join("sha256").join(&sha[..2]).join(&sha);
    assert_eq!(std::fs::read(&object).unwrap(), file.bytes, "the object holds the file");
    assert_eq!(chunk_rows(app, branch).await, 0, "nothing in the database's chunks");

    let whole = content(app, branch, patient, id, "", &[]).await;
    assert_status(&whole, 200);
    assert_eq!(whole.bytes, file.bytes);
    let part = content(app, branch, patient, id, "", &[("range", "bytes=1000-1999")]).await;
    assert_status(&part, 206);
    assert_eq!(part.bytes, file.bytes[1000..2000]);
    let thumb = content(app, branch, patient, id, "?thumbnail=100", &[]).await;
    assert_status(&thumb, 200);
    assert_eq!(super::dimensions(&thumb.bytes), (100, 75));

    let scratch = Scratch::new("objects-backup");
    let restored = restored_copy(app, &scratch, "MAINO").await;
    let back = content(app, restored, patient, id, "", &[]).await;
    assert_status(&back, 200);
    assert_eq!(back.bytes, file.bytes);
}
