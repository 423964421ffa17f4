//! A branch's letterhead: its address and phone through the branch resource, its logo as an
//! uploaded PNG or JPEG, checked for type and size, audited like any change of the branch.

use reqwest::Method;
use serde_json::json;

use crate::support::printed::png_logo;
use crate::support::{TestApp, assert_error, assert_invalid, assert_status, reply};

fn upload(app: &TestApp, branch: i64, content_type: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
    app.request(Method::PUT, &format!("/api/v1/branches/{branch}/logo"), None)
        .header("content-type", content_type)
        .body(body)
}

#[tokio::test]
async fn an_administrator_sets_reads_and_removes_a_logo_of_an_image_type_and_size_that_fit() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let path = format!("/api/v1/branches/{branch}");
    let r = app.put(&path, None, json!({ "address": "12 Rizal Avenue", "phone": "+63 2 8123 4567" })).await;
    assert_status(&r, 200);
    assert_eq!(
        (r.body["data"]["address"].as_str(), r.body["data"]["phone"].as_str()),
        (Some("12 Rizal Avenue"), Some("+63 2 8123 4567"))
    );
    assert_eq!(r.body["data"]["logo_media_type"], json!(null));
    let version = r.body["data"]["version"].as_i64().unwrap();

    let logo = png_logo(64);
    let set = reply(upload(&app, branch, "image/png", logo.clone())).await;
    assert_status(&set, 200);
    assert_eq!(set.body["data"]["logo_media_type"], "image/png");
    assert_eq!(set.body["data"]["version"], version + 1, "a logo is a change of the branch");
    let res =
        reply(app.request(Method::GET, &format!("{path}/logo"), None).header("accept", "image/*")).await;
    assert_status(&res, 200);
    assert_eq!(res.header("content-type"), Some("image/png"));
    assert_eq!(res.bytes, logo);

    // Not an image, not the type it says, too large, or a stale version: nothing changes.
    assert_invalid(&reply(upload(&app, branch, "image/png", b"GIF89a....".to_vec())).await, &["logo"]);
    assert_invalid(&reply(upload(&app, branch, "image/jpeg", logo.clone())).await, &["logo"]);
    assert_invalid(&reply(upload(&app, branch, "image/gif", logo.clone())).await, &["logo"]);
    let mut huge = logo.clone();
    huge.resize(600 * 1024, 0);
    assert_error(&reply(upload(&app, branch, "image/png", huge)).await, 413, "payload_too_large");
    let stale = upload(&app, branch, "image/png", logo.clone()).header("if-match", format!("\"{version}\""));
    assert_error(&reply(stale).await, 412, "precondition_failed");
    assert_eq!(app.get(&path, None).await.body["data"]["version"], version + 1);

    // Others may not.
    let (_, doctor) = app.create_user("dr.reyes", &["doctor"], &[branch]).await;
    let r = reply(
        app.request_as(&doctor, Method::PUT, &format!("{path}/logo"), None)
            .header("content-type", "image/png")
            .body(logo),
    )
    .await;
    assert_error(&r, 403, "forbidden");

    let removed = app.delete(&format!("{path}/logo"), None).await;
    assert_status(&removed, 200);
    assert_eq!(removed.body["data"]["logo_media_type"], json!(null));
    let gone = app.request(Method::GET, &format!("{path}/logo"), None).header("accept", "image/*");
    assert_error(&reply(gone).await, 404, "not_found");
    let trail = app.audit_rows("/api/v1/system-audit-logs", None, "branches", branch).await;
    let actions: Vec<&str> = trail.iter().map(|row| row["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["update", "set_logo", "remove_logo"]);
    assert_eq!(trail[1]["after"]["logo_media_type"], "image/png");
    assert_eq!(trail[1]["route"], "PUT /api/v1/branches/{id}/logo");
}
