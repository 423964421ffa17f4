//! Branches, branch services and staff.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Branches
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branch_create_provisions_a_branch_usable_at_once() {
    let app = spawn().await;
    let r = app.post(BRANCHES, None, json!({ "code": "NORTH", "name": "North Branch" })).await;
    assert_status(&r, 201);
    assert_message(&r);
    let id = id_of(&r);
    let data = &r.body["data"];
    assert_eq!(data["code"], "NORTH");
    assert_eq!(data["name"], "North Branch");
    assert_eq!(data["status"], "active");
    assert_eq!(data["schema_name"], format!("branch_{id}"));
    assert!(data.get("database_url").is_none(), "database_url shown: {data}");

    let r = reply(app.request(Method::POST, PATIENTS, Some(id)).json(&json!({
        "first_name": "Nora", "last_name": "North", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_status(&r, 201); // the new branch serves at once
    assert_eq!(r.body["data"]["pin"], "NORTH-000001");

    let r = app.get(&format!("{BRANCHES}/{id}"), None).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["code"], "NORTH");
    assert_eq!(r.body["data"]["status"], "active");
    assert!(r.body["data"].get("database_url").is_none(), "{}", r.text);
    let r = app.get(&format!("{BRANCHES}?perPage=100"), None).await;
    assert_status(&r, 200);
    assert!(ids(&r.body["data"]).contains(&id), "{}", r.text);
    assert!(r.body["data"].as_array().unwrap().iter().all(|b| b.get("database_url").is_none()), "{}", r.text);
    let client = app.state.registry.get().await.unwrap();
    let exists: bool = client
        .query_one(&format!("SELECT to_regclass('branch_{id}.patients') IS NOT NULL"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(exists, "the branch schema was provisioned");
}

#[tokio::test]
async fn branch_codes_are_2_to_10_uppercase_letters_or_digits_and_unique() {
    let app = spawn().await;
    for code in ["A", "ABCDEFGHIJK", "AB-1", "AB 1", "", "ÄBC"] {
        let r = app.post(BRANCHES, None, json!({ "code": code, "name": "Bad" })).await;
        assert_invalid(&r, &["code"]);
    }
    assert_invalid(&app.post(BRANCHES, None, json!({ "name": "No code" })).await, &["code"]);
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "NONAME" })).await, &["name"]);
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "MAIN", "name": "Again" })).await, &["code"]);
    // Lowercase input is taken as the uppercase code: stored codes are always uppercase.
    let r = app.post(BRANCHES, None, json!({ "code": "south2", "name": "South" })).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["code"], "SOUTH2");
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "SOUTH2", "name": "Dup" })).await, &["code"]);
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "main", "name": "Dup" })).await, &["code"]);
    let r = app.post(BRANCHES, None, json!({ "code": "AB", "name": "Two" })).await;
    assert_status(&r, 201); // two characters are enough
    let r = app.post(BRANCHES, None, json!({ "code": "ABCDEFGHIJ", "name": "Ten" })).await;
    assert_status(&r, 201); // ten characters are allowed
    let client = app.state.registry.get().await.unwrap();
    let codes: Vec<String> = client
        .query("SELECT code FROM branches ORDER BY code", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(codes, vec!["AB", "ABCDEFGHIJ", "MAIN", "SOUTH2"], "refused requests created nothing");
}

#[tokio::test]
async fn branch_update_changes_the_name_but_never_the_code() {
    let app = spawn().await;
    let r = app.post(BRANCHES, None, json!({ "code": "EAST", "name": "East" })).await;
    let id = id_of(&r);
    let path = format!("{BRANCHES}/{id}");
    let r = app.put(&path, None, json!({ "name": "East Wing" })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["name"], "East Wing");
    assert_eq!(r.body["data"]["code"], "EAST");
    assert!(r.body["data"].get("database_url").is_none(), "{}", r.text);
    assert_eq!(app.get(&path, None).await.body["data"]["name"], "East Wing");

    assert_invalid(&app.put(&path, None, json!({ "code": "WEST" })).await, &["code"]);
    assert_invalid(&app.put(&path, None, json!({ "code": "WEST", "name": "West" })).await, &["code"]);
    assert_invalid(&app.put(&path, None, json!({ "name": "" })).await, &["name"]);
    assert_invalid(
        &app.put(&path, None, json!({ "database_url": "postgres://elsewhere/db" })).await,
        &["database_url"],
    );
    // Echoing the unchanged code back is fine.
    let r = app.put(&path, None, json!({ "code": "EAST", "name": "East Side" })).await;
    assert_status(&r, 200);
    let r = app.get(&path, None).await;
    assert_eq!(r.body["data"]["code"], "EAST");
    assert_eq!(r.body["data"]["name"], "East Side");
    assert_error(
        &app.put(&format!("{BRANCHES}/987654"), None, json!({ "name": "X" })).await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn branch_delete_archives_and_keeps_the_schema() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let r = app.post(BRANCHES, None, json!({ "code": "GONE", "name": "Closing" })).await;
    let id = id_of(&r);
    let (_, token) = app.create_user("greta", &["nurse"], &[main, id]).await;
    app.create_patient(id, "Kept", "Record").await;
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(id))).await, 200);

    let r = app.delete(&format!("{BRANCHES}/{id}"), None).await;
    assert_status(&r, 200);
    assert_message(&r);

    let r = app.get(&format!("{BRANCHES}/{id}"), None).await;
    assert_status(&r, 200); // an archived branch can still be looked at
    assert_eq!(r.body["data"]["status"], "archived");
    let r = reply(app.request(Method::GET, PATIENTS, Some(id))).await;
    assert_status(&r, 403); // admin in an archived branch
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(id))).await;
    assert_status(&r, 403); // user in an archived branch
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await, 200);

    for t in [&token, &app.admin_token] {
        let r = reply(app.request_as(t, Method::GET, "/api/v1/auth/branches", None)).await;
        assert_status(&r, 200);
        assert!(!ids(&r.body["data"]).contains(&id), "archived branch listed: {}", r.text);
        assert!(ids(&r.body["data"]).contains(&main), "{}", r.text);
    }
    let r = app.login_reply("greta", USER_PASSWORD).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body["data"]["branches"]), BTreeSet::from([main]), "{}", r.text);

    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            &format!(
                "SELECT to_regclass('branch_{id}.patients') IS NOT NULL,
                        (SELECT count(*) FROM branch_{id}.patients)"
            ),
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "the schema is kept");
    assert_eq!(row.get::<_, i64>(1), 1, "the records are kept");
    assert_error(&app.delete(&format!("{BRANCHES}/987654"), None).await, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// Branch services and staff
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branch_services_crud() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHR").await;
    let base = format!("{BRANCHES}/{main}/services");
    let r = app
        .post(
            &base,
            None,
            json!({ "name": "Refraction", "code": "rf", "description": "Eye tests", "active": true }),
        )
        .await;
    assert_status(&r, 201);
    assert_message(&r);
    let id = id_of(&r);
    assert_eq!(r.body["data"]["name"], "Refraction");
    assert_eq!(r.body["data"]["code"], "RF");
    assert_eq!(r.body["data"]["description"], "Eye tests");
    assert_eq!(r.body["data"]["active"], true);
    assert_eq!(r.body["data"]["staff_ids"], json!([]));

    let r = app.get(&base, None).await;
    assert_status(&r, 200);
    assert_eq!(ids(&r.body["data"]), BTreeSet::from([id]));
    assert_eq!(r.body["meta"]["total"], 1);
    let r = app.get(&format!("{BRANCHES}/{other}/services"), None).await;
    assert_eq!(r.body["meta"]["total"], 0, "another branch has its own services: {}", r.text);
    assert_error(&app.get(&format!("{BRANCHES}/{other}/services/{id}"), None).await, 404, "not_found");

    let r = app.get(&format!("{base}/{id}"), None).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["code"], "RF");

    let r =
        app.put(&format!("{base}/{id}"), None, json!({ "name": "Refraction room", "active": false })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["name"], "Refraction room");
    assert_eq!(r.body["data"]["active"], false);
    assert_eq!(r.body["data"]["description"], "Eye tests");
    let r = app.get(&format!("{base}/{id}"), None).await;
    assert_eq!(r.body["data"]["name"], "Refraction room");
    assert_eq!(r.body["data"]["active"], false);

    assert_invalid(&app.post(&base, None, json!({ "code": "X" })).await, &["name"]);
    assert_invalid(&app.post(&base, None, json!({ "name": "No code" })).await, &["code"]);
    assert_invalid(&app.post(&base, None, json!({ "name": "Bad", "code": "TOOLONG" })).await, &["code"]);

    let r = app.delete(&format!("{base}/{id}"), None).await;
    assert_status(&r, 200);
    assert_error(&app.get(&format!("{base}/{id}"), None).await, 404, "not_found");
    assert_eq!(app.get(&base, None).await.body["meta"]["total"], 0);
    assert_error(&app.delete(&format!("{base}/{id}"), None).await, 404, "not_found");
}

#[tokio::test]
async fn branch_services_of_a_nonexistent_branch_are_404() {
    let app = spawn().await;
    let base = format!("{BRANCHES}/987654/services");
    assert_error(&app.get(&base, None).await, 404, "not_found");
    assert_error(&app.post(&base, None, json!({ "name": "Ghost", "code": "G" })).await, 404, "not_found");
    assert_error(&app.get(&format!("{base}/1"), None).await, 404, "not_found");
    let client = app.state.registry.get().await.unwrap();
    let n: i64 = client.query_one("SELECT count(*) FROM branch_services", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn service_codes_are_unique_within_a_branch_only() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("SECOND").await;
    new_service(&app, main, "Reception", "RC").await;
    let r = app
        .post(&format!("{BRANCHES}/{main}/services"), None, json!({ "name": "Again", "code": "rc" }))
        .await;
    assert_invalid(&r, &["code"]);
    let r = app
        .post(&format!("{BRANCHES}/{other}/services"), None, json!({ "name": "Reception", "code": "RC" }))
        .await;
    assert_status(&r, 201); // the same code in another branch
    assert_eq!(r.body["data"]["code"], "RC");
}

#[tokio::test]
async fn staff_are_assigned_from_users_with_access_to_the_branch() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("FAR").await;
    let svc = new_service(&app, main, "Cashier", "C").await;
    let (staff, _) = app.create_user("stan", &["cashier"], &[main]).await;
    let (outsider, _) = app.create_user("olga", &["cashier"], &[other]).await;
    let path = format!("{BRANCHES}/{main}/services/{svc}");

    let r = app.post(&format!("{path}/staff"), None, json!({ "user_id": staff })).await;
    assert_status(&r, 200);
    assert_message(&r);
    let r = app.get(&path, None).await;
    assert_eq!(int_list(&r.body["data"]["staff_ids"]), vec![staff], "{}", r.text);

    assert_invalid(
        &app.post(&format!("{path}/staff"), None, json!({ "user_id": outsider })).await,
        &["user_id"],
    );
    assert_invalid(
        &app.post(&format!("{path}/staff"), None, json!({ "user_id": 987_654 })).await,
        &["user_id"],
    );
    assert_invalid(&app.post(&format!("{path}/staff"), None, json!({})).await, &["user_id"]);
    assert_invalid(
        &app.post(&format!("{path}/staff"), None, json!({ "user_id": "abc" })).await,
        &["user_id"],
    );
    let r = app.get(&path, None).await;
    assert_eq!(int_list(&r.body["data"]["staff_ids"]), vec![staff], "refusals assign nobody: {}", r.text);
    let r = app
        .post(&format!("{BRANCHES}/{main}/services/987654/staff"), None, json!({ "user_id": staff }))
        .await;
    assert_error(&r, 404, "not_found");

    let r = app.delete(&format!("{path}/staff/{staff}"), None).await;
    assert_status(&r, 200);
    assert_eq!(int_list(&app.get(&path, None).await.body["data"]["staff_ids"]), Vec::<i64>::new());
    assert_error(&app.delete(&format!("{path}/staff/{staff}"), None).await, 404, "not_found");
}
