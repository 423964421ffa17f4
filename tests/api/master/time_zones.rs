//! Branch time zones.

use super::*;

// ---------------------------------------------------------------------------------------
// Branch time zones
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branches_have_a_known_time_zone() {
    let app = TestApp::spawn().await;
    let r = app
        .post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": "Mars/Olympus_Mons" }))
        .await;
    assert_invalid(&r, &["timezone"]);
    let r =
        app.post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": "not a zone!" })).await;
    assert_invalid(&r, &["timezone"]);
    // Names a tz installation carries that are not time zones.
    for not_a_zone in ["localtime", "posixrules", "Factory", "posix/Asia/Manila", "right/UTC"] {
        let r =
            app.post(BRANCHES, None, json!({ "code": "EAST", "name": "East", "timezone": not_a_zone })).await;
        assert_invalid(&r, &["timezone"]);
    }
    // Legacy names IANA keeps as links are zones.
    let japan =
        app.created(BRANCHES, None, json!({ "code": "JP", "name": "Japan", "timezone": "Japan" })).await;
    assert_eq!(japan["timezone"], "Japan");
    let east = app.created(BRANCHES, None, json!({ "code": "EAST", "name": "East" })).await;
    assert_eq!(east["timezone"], "UTC");
    let west = app
        .created(BRANCHES, None, json!({ "code": "WEST", "name": "West", "timezone": "Europe/Lisbon" }))
        .await;
    assert_eq!(west["timezone"], "Europe/Lisbon");
    let member = format!("{BRANCHES}/{}", id_of(&east));
    let r = app.put(&member, None, json!({ "timezone": "Asia/Manila" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["timezone"], "Asia/Manila");
    assert_eq!(app.get(&member, None).await.body["data"]["timezone"], "Asia/Manila");
    assert_invalid(&app.put(&member, None, json!({ "timezone": "Nowhere/City" })).await, &["timezone"]);
    assert_invalid(&app.put(&member, None, json!({ "timezone": "" })).await, &["timezone"]);
    let client = app.state.registry.get().await.unwrap();
    let stored: String = client
        .query_one("SELECT timezone FROM branches WHERE id = $1", &[&id_of(&east)])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "Asia/Manila");
}

#[tokio::test]
async fn a_new_branch_takes_the_clinic_time_zone_by_default() {
    let app = TestApp::spawn_with(|s| s.clinic_timezone = "Asia/Manila".into()).await;
    let branch = app.created(BRANCHES, None, json!({ "code": "EAST", "name": "East" })).await;
    assert_eq!(branch["timezone"], "Asia/Manila");
}
