//! The admin routes (permission `admin.access`) and the decisions on roles,
//! branches, branch services, staff and users, over HTTP against a real server.

use std::collections::BTreeSet;

use crate::support::{Reply, TestApp, assert_error, assert_invalid, id_of, reply};
use reqwest::Method;
use serde_json::{Value, json};

const BRANCHES: &str = "/api/v1/branches";
const ROLES: &str = "/api/v1/roles";
const USERS: &str = "/api/v1/users";
const PERMISSIONS: &str = "/api/v1/permissions";
const PATIENTS: &str = "/api/v1/patients";
const USER_PASSWORD: &str = "user-password-1";
const DEFAULT_ROLES: [&str; 6] = ["admin", "cashier", "doctor", "nurse", "pharmacist", "receptionist"];

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

#[track_caller]
fn assert_message(r: &Reply) {
    assert!(r.body["message"].as_str().is_some_and(|m| !m.trim().is_empty()), "no message: {}", r.text);
}

/// Admin tests log in often; the login limit is not what they are about.
async fn spawn() -> TestApp {
    TestApp::spawn_with(|s| s.rate_limit_login = 1000).await
}

async fn role_id(app: &TestApp, name: &str) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    client.query_one("SELECT id FROM roles WHERE name = $1", &[&name]).await.unwrap().get(0)
}

async fn profile_status(app: &TestApp, token: &str) -> u16 {
    reply(app.request_as(token, Method::GET, "/api/v1/auth/profile", None)).await.status
}

fn ids(list: &Value) -> BTreeSet<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v["id"].as_i64().unwrap_or_else(|| panic!("no id in {v}")))
        .collect()
}

fn int_list(v: &Value) -> Vec<i64> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(|x| x.as_i64().unwrap()).collect()
}

/// No key of `value`, at any depth, mentions a password.
#[track_caller]
fn assert_no_password_fields(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                assert!(!key.contains("password"), "a password field is shown: {key} in {value}");
                assert_no_password_fields(inner);
            }
        }
        Value::Array(items) => items.iter().for_each(assert_no_password_fields),
        _ => {}
    }
}

/// Creates a branch service; returns its id.
async fn new_service(app: &TestApp, branch: i64, name: &str, code: &str) -> i64 {
    let r =
        app.post(&format!("{BRANCHES}/{branch}/services"), None, json!({ "name": name, "code": code })).await;
    assert_eq!(r.status, 201, "create service: {}", r.text);
    id_of(&r)
}

// ---------------------------------------------------------------------------------------
// admin.access (rule 6)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn admin_routes_are_403_without_admin_access_and_401_without_a_token() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let admin = app.admin_id().await;
    let nurse_role = role_id(&app, "nurse").await;
    let admin_role = role_id(&app, "admin").await;
    let (doctor_id, doctor) = app.create_user("doc", &["doctor"], &[main]).await;
    let svc = new_service(&app, main, "Reception", "R").await;
    let services = format!("{BRANCHES}/{main}/services");
    let routes: Vec<(Method, String, Value)> = vec![
        (Method::GET, BRANCHES.into(), json!({})),
        (Method::POST, BRANCHES.into(), json!({ "code": "HACK", "name": "Hacked" })),
        (Method::GET, format!("{BRANCHES}/{main}"), json!({})),
        (Method::PUT, format!("{BRANCHES}/{main}"), json!({ "name": "Hacked" })),
        (Method::DELETE, format!("{BRANCHES}/{main}"), json!({})),
        (Method::GET, services.clone(), json!({})),
        (Method::POST, services.clone(), json!({ "name": "Hack", "code": "H" })),
        (Method::GET, format!("{services}/{svc}"), json!({})),
        (Method::PUT, format!("{services}/{svc}"), json!({ "name": "Hacked" })),
        (Method::DELETE, format!("{services}/{svc}"), json!({})),
        (Method::POST, format!("{services}/{svc}/staff"), json!({ "user_id": doctor_id })),
        (Method::DELETE, format!("{services}/{svc}/staff/{doctor_id}"), json!({})),
        (Method::GET, ROLES.into(), json!({})),
        (Method::POST, ROLES.into(), json!({ "name": "hack", "permissions": ["admin.access"] })),
        (Method::GET, format!("{ROLES}/{nurse_role}"), json!({})),
        (Method::PUT, format!("{ROLES}/{nurse_role}"), json!({ "permissions": ["admin.access"] })),
        (Method::DELETE, format!("{ROLES}/{nurse_role}"), json!({})),
        (Method::GET, USERS.into(), json!({})),
        (
            Method::POST,
            USERS.into(),
            json!({ "name": "H", "email": "h@example.test", "username": "hack", "password": "hack-password-1" }),
        ),
        (Method::GET, format!("{USERS}/{admin}"), json!({})),
        (Method::PUT, format!("{USERS}/{doctor_id}"), json!({ "role_ids": [admin_role] })),
        (Method::PUT, format!("{USERS}/{admin}"), json!({ "active": false })),
        (Method::DELETE, format!("{USERS}/{admin}"), json!({})),
        (Method::GET, PERMISSIONS.into(), json!({})),
    ];
    for (method, path, body) in &routes {
        let r = reply(app.request_as(&doctor, method.clone(), path, None).json(body)).await;
        assert_eq!(r.status, 403, "doctor {method} {path}: {}", r.text);
        assert_error(&r, 403, "forbidden");
        let r = reply(app.http.request(method.clone(), app.url(path)).json(body)).await;
        assert_error(&r, 401, "unauthenticated");
    }
    // Nothing was changed by the refused requests.
    let client = app.state.registry.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM branches WHERE code = 'HACK'),
                    (SELECT name FROM branches WHERE id = $1),
                    (SELECT status FROM branches WHERE id = $1),
                    (SELECT count(*) FROM roles WHERE name = 'hack'),
                    (SELECT count(*) FROM users WHERE username = 'hack'),
                    (SELECT active FROM users WHERE id = $2),
                    (SELECT count(*) FROM user_roles WHERE user_id = $3 AND role_id = $4),
                    (SELECT count(*) FROM role_permissions WHERE role_id = $5 AND permission = 'admin.access'),
                    (SELECT count(*) FROM branch_services WHERE id = $6 AND deleted_at IS NULL)",
            &[&main, &admin, &doctor_id, &admin_role, &nurse_role, &svc],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 0, "branch created");
    assert_eq!(row.get::<_, String>(1), "Main Branch", "branch renamed");
    assert_eq!(row.get::<_, String>(2), "active", "branch archived");
    assert_eq!(row.get::<_, i64>(3), 0, "role created");
    assert_eq!(row.get::<_, i64>(4), 0, "user created");
    assert!(row.get::<_, bool>(5), "admin deactivated");
    assert_eq!(row.get::<_, i64>(6), 0, "doctor made admin");
    assert_eq!(row.get::<_, i64>(7), 0, "nurse role given admin.access");
    assert_eq!(row.get::<_, i64>(8), 1, "service deleted");
    // The doctor is not refused everything: clinical work goes on.
    let r = reply(app.request_as(&doctor, Method::GET, PATIENTS, Some(main))).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn the_permission_not_the_role_name_opens_the_admin_routes() {
    let app = spawn().await;
    let r = app.post(ROLES, None, json!({ "name": "operators", "permissions": ["admin.access"] })).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (_, token) = app.create_user("opal", &["operators"], &[]).await;
    for path in [ROLES, USERS, BRANCHES, PERMISSIONS] {
        let r = reply(app.request_as(&token, Method::GET, path, None)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
}

// ---------------------------------------------------------------------------------------
// Roles and permissions
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn roles_list_is_paginated_and_holds_the_default_roles() {
    let app = spawn().await;
    let r = app.get(ROLES, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let names: BTreeSet<&str> =
        r.body["data"].as_array().unwrap().iter().map(|role| role["name"].as_str().unwrap()).collect();
    assert_eq!(names, DEFAULT_ROLES.into_iter().collect(), "{}", r.text);
    let meta = &r.body["meta"];
    assert_eq!(meta["total"], 6);
    assert_eq!(meta["current_page"], 1);
    assert_eq!(meta["per_page"], 15);
    assert_eq!(meta["last_page"], 1);
    assert_eq!(meta["from"], 1);
    assert_eq!(meta["to"], 6);
    let links = &r.body["links"];
    assert!(links["first"].as_str().is_some_and(|l| l.contains("/api/v1/roles")), "{links}");
    assert!(links["last"].as_str().is_some(), "{links}");
    assert!(links["prev"].is_null() && links["next"].is_null(), "{links}");
    // Sorted by name by default.
    let listed: Vec<&str> =
        r.body["data"].as_array().unwrap().iter().map(|role| role["name"].as_str().unwrap()).collect();
    assert_eq!(listed, DEFAULT_ROLES.to_vec());
    // A second page.
    let r = app.get(&format!("{ROLES}?perPage=4&page=2"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(r.body["meta"]["from"], 5);
    assert!(r.body["links"]["prev"].is_string() && r.body["links"]["next"].is_null(), "{}", r.text);
}

#[tokio::test]
async fn admin_role_holds_every_permission_of_the_catalogue() {
    let app = spawn().await;
    let r = app.get(PERMISSIONS, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let catalogue: Vec<String> =
        r.body["data"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect();
    assert!(catalogue.contains(&"admin.access".to_owned()), "{}", r.text);
    assert!(catalogue.contains(&"patients.read".to_owned()), "{}", r.text);
    assert!(
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["description"].as_str().is_some_and(|d| !d.is_empty())),
        "every permission is described: {}",
        r.text
    );
    let admin_role = role_id(&app, "admin").await;
    let r = app.get(&format!("{ROLES}/{admin_role}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mut expected = catalogue.clone();
    expected.sort();
    let held: Vec<String> = serde_json::from_value(r.body["data"]["permissions"].clone()).unwrap();
    assert_eq!(held, expected);
    // The doctor role is clinical, not administrative.
    let r = app.get(&format!("{ROLES}/{}", role_id(&app, "doctor").await), None).await;
    let held: Vec<String> = serde_json::from_value(r.body["data"]["permissions"].clone()).unwrap();
    assert!(held.contains(&"patients.read".to_owned()), "{held:?}");
    assert!(!held.contains(&"admin.access".to_owned()), "{held:?}");
}

#[tokio::test]
async fn role_create_and_get_show_sorted_permissions() {
    let app = spawn().await;
    let r = app
        .post(
            ROLES,
            None,
            json!({
                "name": "front office",
                "description": "Desk and till",
                "permissions": ["patients.write", "billing.read", "patients.read", "billing.read"],
            }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_message(&r);
    let id = id_of(&r);
    assert_eq!(r.body["data"]["name"], "front office");
    assert_eq!(r.body["data"]["description"], "Desk and till");
    assert_eq!(r.body["data"]["permissions"], json!(["billing.read", "patients.read", "patients.write"]));
    let r = app.get(&format!("{ROLES}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["name"], "front office");
    assert_eq!(r.body["data"]["permissions"], json!(["billing.read", "patients.read", "patients.write"]));
    let r = app.get(&format!("{ROLES}/987654"), None).await;
    assert_error(&r, 404, "not_found");
}

#[tokio::test]
async fn role_create_validates_name_and_permissions() {
    let app = spawn().await;
    let r = app
        .post(ROLES, None, json!({ "name": "auditor", "permissions": ["patients.read", "root.everything"] }))
        .await;
    assert_invalid(&r, &["permissions"]);
    let r = app.post(ROLES, None, json!({ "name": "auditor", "permissions": "patients.read" })).await;
    assert_invalid(&r, &["permissions"]);
    for name in ["doctor", "DOCTOR", " Doctor "] {
        let r = app.post(ROLES, None, json!({ "name": name, "permissions": [] })).await;
        assert_invalid(&r, &["name"]);
    }
    let r = app.post(ROLES, None, json!({ "permissions": ["patients.read"] })).await;
    assert_invalid(&r, &["name"]);
    let client = app.state.registry.get().await.unwrap();
    let roles: i64 = client.query_one("SELECT count(*) FROM roles", &[]).await.unwrap().get(0);
    assert_eq!(roles, 6, "no role was created by a refused request");
}

#[tokio::test]
async fn role_permission_changes_apply_to_holders_at_once() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let r = app.post(ROLES, None, json!({ "name": "viewer", "permissions": ["dashboard.read"] })).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let role = id_of(&r);
    let (_, token) = app.create_user("vera", &["viewer"], &[main]).await;
    let list = || app.request_as(&token, Method::GET, PATIENTS, Some(main));
    assert_eq!(reply(list()).await.status, 403, "no patients.read yet");

    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": ["patients.read"] })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["permissions"], json!(["patients.read"]));
    assert_eq!(r.body["data"]["name"], "viewer", "fields not sent are kept");
    let r = reply(list()).await;
    assert_eq!(r.status, 200, "the holder gains access without logging in again: {}", r.text);
    let r = reply(app.request_as(&token, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "A", "last_name": "B", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_eq!(r.status, 403, "reading is not writing: {}", r.text);

    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": [] })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["permissions"], json!([]));
    assert_eq!(reply(list()).await.status, 403, "the holder loses access at once");

    // Renaming keeps the permissions; an unknown permission changes nothing.
    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "name": "viewers" })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["name"], "viewers");
    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": ["nope.never"] })).await;
    assert_invalid(&r, &["permissions"]);
    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "name": "nurse" })).await;
    assert_invalid(&r, &["name"]);
}

#[tokio::test]
async fn role_held_by_a_user_cannot_be_deleted_an_unheld_one_can() {
    let app = spawn().await;
    let r = app.post(ROLES, None, json!({ "name": "held", "permissions": ["queue.read"] })).await;
    let held = id_of(&r);
    let r = app.post(ROLES, None, json!({ "name": "spare", "permissions": ["queue.read"] })).await;
    let spare = id_of(&r);
    let (_, token) = app.create_user("hal", &["held"], &[]).await;

    let r = app.delete(&format!("{ROLES}/{held}"), None).await;
    assert_error(&r, 409, "role_in_use");
    assert_eq!(app.get(&format!("{ROLES}/{held}"), None).await.status, 200, "the held role is kept");
    assert_eq!(profile_status(&app, &token).await, 200);

    let r = app.delete(&format!("{ROLES}/{spare}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_message(&r);
    assert_error(&app.get(&format!("{ROLES}/{spare}"), None).await, 404, "not_found");
    assert_error(&app.delete(&format!("{ROLES}/{spare}"), None).await, 404, "not_found");
    let r = app.get(ROLES, None).await;
    assert_eq!(r.body["meta"]["total"], 7, "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// Branches
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn branch_create_provisions_a_branch_usable_at_once() {
    let app = spawn().await;
    let r = app.post(BRANCHES, None, json!({ "code": "NORTH", "name": "North Branch" })).await;
    assert_eq!(r.status, 201, "{}", r.text);
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
    assert_eq!(r.status, 201, "the new branch serves at once: {}", r.text);
    assert_eq!(r.body["data"]["pin"], "NORTH-000001");

    let r = app.get(&format!("{BRANCHES}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["code"], "NORTH");
    assert_eq!(r.body["data"]["status"], "active");
    assert!(r.body["data"].get("database_url").is_none(), "{}", r.text);
    let r = app.get(&format!("{BRANCHES}?perPage=100"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["data"]["code"], "SOUTH2");
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "SOUTH2", "name": "Dup" })).await, &["code"]);
    assert_invalid(&app.post(BRANCHES, None, json!({ "code": "main", "name": "Dup" })).await, &["code"]);
    let r = app.post(BRANCHES, None, json!({ "code": "AB", "name": "Two" })).await;
    assert_eq!(r.status, 201, "two characters are enough: {}", r.text);
    let r = app.post(BRANCHES, None, json!({ "code": "ABCDEFGHIJ", "name": "Ten" })).await;
    assert_eq!(r.status, 201, "ten characters are allowed: {}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(id))).await.status, 200);

    let r = app.delete(&format!("{BRANCHES}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_message(&r);

    let r = app.get(&format!("{BRANCHES}/{id}"), None).await;
    assert_eq!(r.status, 200, "an archived branch can still be looked at: {}", r.text);
    assert_eq!(r.body["data"]["status"], "archived");
    let r = reply(app.request(Method::GET, PATIENTS, Some(id))).await;
    assert_eq!(r.status, 403, "admin in an archived branch: {}", r.text);
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(id))).await;
    assert_eq!(r.status, 403, "user in an archived branch: {}", r.text);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await.status, 200);

    for t in [&token, &app.admin_token] {
        let r = reply(app.request_as(t, Method::GET, "/api/v1/auth/branches", None)).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(!ids(&r.body["data"]).contains(&id), "archived branch listed: {}", r.text);
        assert!(ids(&r.body["data"]).contains(&main), "{}", r.text);
    }
    let r = app.login_reply("greta", USER_PASSWORD).await;
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 201, "{}", r.text);
    assert_message(&r);
    let id = id_of(&r);
    assert_eq!(r.body["data"]["name"], "Refraction");
    assert_eq!(r.body["data"]["code"], "RF");
    assert_eq!(r.body["data"]["description"], "Eye tests");
    assert_eq!(r.body["data"]["active"], true);
    assert_eq!(r.body["data"]["staff_ids"], json!([]));

    let r = app.get(&base, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r.body["data"]), BTreeSet::from([id]));
    assert_eq!(r.body["meta"]["total"], 1);
    let r = app.get(&format!("{BRANCHES}/{other}/services"), None).await;
    assert_eq!(r.body["meta"]["total"], 0, "another branch has its own services: {}", r.text);
    assert_error(&app.get(&format!("{BRANCHES}/{other}/services/{id}"), None).await, 404, "not_found");

    let r = app.get(&format!("{base}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["code"], "RF");

    let r =
        app.put(&format!("{base}/{id}"), None, json!({ "name": "Refraction room", "active": false })).await;
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 201, "the same code in another branch: {}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
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
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(int_list(&app.get(&path, None).await.body["data"]["staff_ids"]), Vec::<i64>::new());
    assert_error(&app.delete(&format!("{path}/staff/{staff}"), None).await, 404, "not_found");
}

// ---------------------------------------------------------------------------------------
// Users
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn user_create_answers_201_without_password_and_the_user_sees_exactly_their_branches() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let second = app.create_branch("UB").await;
    let third = app.create_branch("UC").await;
    let nurse = role_id(&app, "nurse").await;
    let receptionist = role_id(&app, "receptionist").await;
    let password = "nina-password-1";
    let r = app
        .post(
            USERS,
            None,
            json!({
                "name": "Nina Nurse",
                "email": "nina@example.test",
                "username": "nina",
                "password": password,
                "role_ids": [receptionist, nurse],
                "branch_ids": [second, main],
            }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_message(&r);
    assert_no_password_fields(&r.body);
    assert!(!r.text.contains(password), "the password is echoed: {}", r.text);
    let id = id_of(&r);
    let data = &r.body["data"];
    assert_eq!(data["name"], "Nina Nurse");
    assert_eq!(data["email"], "nina@example.test");
    assert_eq!(data["username"], "nina");
    assert_eq!(data["active"], true);
    let mut roles = vec![nurse, receptionist];
    roles.sort();
    assert_eq!(int_list(&data["role_ids"]), roles);
    let mut branches = vec![main, second];
    branches.sort();
    assert_eq!(int_list(&data["branch_ids"]), branches);

    let r = app.get(&format!("{USERS}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_no_password_fields(&r.body);
    let r = app.get(&format!("{USERS}?perPage=100"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_no_password_fields(&r.body);
    assert!(ids(&r.body["data"]).contains(&id));

    let r = app.login_reply("nina", password).await;
    assert_eq!(r.status, 200, "the new user logs in: {}", r.text);
    assert_eq!(r.body["data"]["user"]["id"], id);
    assert_eq!(ids(&r.body["data"]["branches"]), BTreeSet::from([main, second]), "{}", r.text);
    // Without a default given, a user starts in the first branch granted (the lowest id).
    assert_eq!(r.body["data"]["user"]["default_branch_id"].as_i64(), Some(main.min(second)));
    let token = r.body["data"]["token"].as_str().unwrap().to_owned();
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/branches", None)).await;
    assert_eq!(ids(&r.body["data"]), BTreeSet::from([main, second]), "{}", r.text);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await.status, 200);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(third))).await.status, 403);
    // The nurse role gives no administration.
    assert_eq!(reply(app.request_as(&token, Method::GET, USERS, None)).await.status, 403);

    let client = app.state.registry.get().await.unwrap();
    let hash: String =
        client.query_one("SELECT password_hash FROM users WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert!(hash.starts_with("$argon2id$") && !hash.contains(password), "{hash}");
}

#[tokio::test]
async fn user_create_validates_every_field() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let nurse = role_id(&app, "nurse").await;
    let user = |username: &str, email: &str| {
        json!({
            "name": "Some One",
            "email": email,
            "username": username,
            "password": "valid-password-1",
            "role_ids": [nurse],
            "branch_ids": [main],
        })
    };
    let r = app.post(USERS, None, user("nina", "nina@example.test")).await;
    assert_eq!(r.status, 201, "{}", r.text);

    assert_invalid(
        &app.post(USERS, None, user("someone@example.test", "someone@example.test")).await,
        &["username"],
    );
    assert_invalid(&app.post(USERS, None, user("NINA", "nina2@example.test")).await, &["username"]);
    assert_invalid(&app.post(USERS, None, user("nina2", "NINA@Example.TEST")).await, &["email"]);
    assert_invalid(&app.post(USERS, None, user("nina2", "not-an-email")).await, &["email"]);
    let mut body = user("nina2", "nina2@example.test");
    body["password"] = json!("short");
    assert_invalid(&app.post(USERS, None, body.clone()).await, &["password"]);
    body.as_object_mut().unwrap().remove("password");
    assert_invalid(&app.post(USERS, None, body).await, &["password"]);
    let mut body = user("nina2", "nina2@example.test");
    body["role_ids"] = json!([nurse, 987_654]);
    assert_invalid(&app.post(USERS, None, body).await, &["role_ids"]);
    let mut body = user("nina2", "nina2@example.test");
    body["branch_ids"] = json!([987_654]);
    assert_invalid(&app.post(USERS, None, body).await, &["branch_ids"]);
    assert_invalid(
        &app.post(USERS, None, json!({ "password": "valid-password-1" })).await,
        &["name", "email", "username"],
    );

    // None of the refused requests left a user behind.
    let r = app.post(USERS, None, user("nina2", "nina2@example.test")).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let client = app.state.registry.get().await.unwrap();
    let users: i64 = client.query_one("SELECT count(*) FROM users", &[]).await.unwrap().get(0);
    assert_eq!(users, 3, "admin, nina and nina2 only");
}

#[tokio::test]
async fn user_password_change_by_admin_ends_their_sessions() {
    let app = spawn().await;
    let (id, token) = app.create_user("paul", &["nurse"], &[]).await;
    assert_eq!(profile_status(&app, &token).await, 200);
    assert_invalid(
        &app.put(&format!("{USERS}/{id}"), None, json!({ "password": "short" })).await,
        &["password"],
    );
    assert_eq!(profile_status(&app, &token).await, 200, "a refused change ends nothing");

    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "password": "fresh-password-9" })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_no_password_fields(&r.body);
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_eq!(app.login_reply("paul", USER_PASSWORD).await.status, 401);
    assert_eq!(app.login_reply("paul", "fresh-password-9").await.status, 200);
    assert_eq!(profile_status(&app, &app.admin_token).await, 200);
}

#[tokio::test]
async fn user_deactivated_by_update_is_locked_out_at_once() {
    let app = spawn().await;
    let (id, token) = app.create_user("dana", &["nurse"], &[]).await;
    assert_eq!(profile_status(&app, &token).await, 200, "cached as valid first");
    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "active": false })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["active"], false);
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = app.login_reply("dana", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    // Reactivated, they may log in again.
    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "active": true })).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(app.login_reply("dana", USER_PASSWORD).await.status, 200);
}

#[tokio::test]
async fn user_delete_deactivates() {
    let app = spawn().await;
    let (id, token) = app.create_user("dora", &["nurse"], &[]).await;
    assert_eq!(profile_status(&app, &token).await, 200);
    let r = app.delete(&format!("{USERS}/{id}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_message(&r);
    let r = app.get(&format!("{USERS}/{id}"), None).await;
    assert_eq!(r.status, 200, "the account is kept: {}", r.text);
    assert_eq!(r.body["data"]["active"], false);
    assert_eq!(r.body["data"]["username"], "dora");
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = app.login_reply("dora", USER_PASSWORD).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_error(&app.delete(&format!("{USERS}/987654"), None).await, 404, "not_found");
}

#[tokio::test]
async fn admin_cannot_deactivate_themself() {
    let app = spawn().await;
    let admin = app.admin_id().await;
    // Deleting oneself is a conflict with who is asking; deactivating oneself by PUT is a bad
    // value of `active`.
    assert_error(&app.delete(&format!("{USERS}/{admin}"), None).await, 409, "cannot_deactivate_self");
    assert_invalid(
        &app.put(&format!("{USERS}/{admin}"), None, json!({ "active": false })).await,
        &["active"],
    );
    assert_eq!(profile_status(&app, &app.admin_token).await, 200);
    let client = app.state.registry.get().await.unwrap();
    let active: bool =
        client.query_one("SELECT active FROM users WHERE id = $1", &[&admin]).await.unwrap().get(0);
    assert!(active);
    assert_eq!(app.login_reply("admin", crate::support::ADMIN_PASSWORD).await.status, 200);
}

#[tokio::test]
async fn user_roles_and_branches_changes_apply_at_once() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let second = app.create_branch("ROLEB").await;
    let (id, token) = app.create_user("rudy", &["nurse"], &[main]).await;
    assert_eq!(reply(app.request_as(&token, Method::GET, ROLES, None)).await.status, 403);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await.status, 403);

    let admin_role = role_id(&app, "admin").await;
    let r = app
        .put(&format!("{USERS}/{id}"), None, json!({ "role_ids": [admin_role], "branch_ids": [second] }))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(int_list(&r.body["data"]["role_ids"]), vec![admin_role]);
    assert_eq!(int_list(&r.body["data"]["branch_ids"]), vec![second]);
    assert_eq!(reply(app.request_as(&token, Method::GET, ROLES, None)).await.status, 200);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await.status, 200);
    assert_eq!(reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await.status, 403);
}

// ---------------------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn admin_writes_are_audited_with_action_and_resource() {
    let app = spawn().await;
    let admin = app.admin_id().await;
    let main = app.main_branch().await;

    let role = id_of(&app.post(ROLES, None, json!({ "name": "temp", "permissions": ["queue.read"] })).await);
    assert_eq!(
        app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": ["queue.write"] })).await.status,
        200
    );
    assert_eq!(app.delete(&format!("{ROLES}/{role}"), None).await.status, 200);

    let branch = id_of(&app.post(BRANCHES, None, json!({ "code": "AUD", "name": "Audited" })).await);
    assert_eq!(
        app.put(&format!("{BRANCHES}/{branch}"), None, json!({ "name": "Audited 2" })).await.status,
        200
    );
    assert_eq!(app.delete(&format!("{BRANCHES}/{branch}"), None).await.status, 200);

    let password = "audited-password-1";
    let user = id_of(
        &app.post(
            USERS,
            None,
            json!({
                "name": "Audrey", "email": "audrey@example.test", "username": "audrey",
                "password": password, "branch_ids": [main],
            }),
        )
        .await,
    );
    assert_eq!(app.put(&format!("{USERS}/{user}"), None, json!({ "name": "Audrey B" })).await.status, 200);
    assert_eq!(
        app.put(&format!("{USERS}/{user}"), None, json!({ "password": "another-password-2" })).await.status,
        200
    );

    let service = new_service(&app, main, "Triage", "T").await;
    let services = format!("{BRANCHES}/{main}/services/{service}");
    assert_eq!(app.put(&services, None, json!({ "name": "Triage 2" })).await.status, 200);
    assert_eq!(app.post(&format!("{services}/staff"), None, json!({ "user_id": user })).await.status, 200);
    assert_eq!(app.delete(&format!("{services}/staff/{user}"), None).await.status, 200);
    assert_eq!(app.delete(&services, None).await.status, 200);
    assert_eq!(app.delete(&format!("{USERS}/{user}"), None).await.status, 200);

    let client = app.state.registry.get().await.unwrap();
    let rows = client
        .query("SELECT action, resource, record_id, user_id FROM public.audit_log ORDER BY id", &[])
        .await
        .unwrap();
    let log: Vec<(String, String, Option<i64>, Option<i64>)> =
        rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
    let has = |action: &str, resource: &str, id: i64| {
        log.iter()
            .any(|(a, r, rec, by)| a == action && r == resource && *rec == Some(id) && *by == Some(admin))
    };
    for (action, resource, id) in [
        ("create", "roles", role),
        ("update", "roles", role),
        ("delete", "roles", role),
        ("create", "branches", branch),
        ("update", "branches", branch),
        ("archive", "branches", branch),
        ("create", "users", user),
        ("update", "users", user),
        ("deactivate", "users", user),
    ] {
        assert!(has(action, resource, id), "no audit of {action} {resource} {id}: {log:?}");
    }
    let service_actions: BTreeSet<&str> = log
        .iter()
        .filter(|(_, r, rec, by)| r.contains("services") && *rec == Some(service) && *by == Some(admin))
        .map(|(a, ..)| a.as_str())
        .collect();
    for action in ["create", "update", "assign_staff", "remove_staff", "delete"] {
        assert!(service_actions.contains(action), "no audit of service {action}: {log:?}");
    }
    // The audit never holds a password or its hash.
    let leaked: i64 = client
        .query_one(
            "SELECT count(*) FROM public.audit_log
              WHERE concat(before::text, after::text) LIKE '%' || $1 || '%'
                 OR concat(before::text, after::text) LIKE '%another-password-2%'
                 OR concat(before::text, after::text) LIKE '%password_hash%'
                 OR concat(before::text, after::text) LIKE '%$scrypt$%'
                 OR concat(before::text, after::text) LIKE '%$argon2id$%'",
            &[&password],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaked, 0, "a password reached the audit log");
}

#[tokio::test]
async fn a_null_active_flag_takes_the_default_on_create_and_is_refused_on_update() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, "/api/v1/users", None).json(&json!({
        "name": "Nil Active", "email": "nil@example.test", "username": "nil", "password": "nil-password-1",
        "active": null, "branch_ids": [main],
    })))
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["data"]["active"], true);
    let id = r.body["data"]["id"].as_i64().unwrap();
    let r = reply(
        app.request(Method::PUT, &format!("/api/v1/users/{id}"), None).json(&json!({ "active": null })),
    )
    .await;
    assert_invalid(&r, &["active"]);
    let path = format!("/api/v1/branches/{main}/services");
    let r = reply(
        app.request(Method::POST, &path, None).json(&json!({ "name": "Desk", "code": "D", "active": null })),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["data"]["active"], true);
}

// ---------------------------------------------------------------------------------------
// The last administrator
// ---------------------------------------------------------------------------------------

/// How many active users hold admin.access.
async fn administrators(app: &TestApp) -> i64 {
    let client = app.state.registry.get().await.unwrap();
    client
        .query_one(
            "SELECT count(DISTINCT u.id) FROM users u JOIN user_roles ur ON ur.user_id = u.id
               JOIN role_permissions rp ON rp.role_id = ur.role_id AND rp.permission = 'admin.access'
              WHERE u.active",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_only_administrator_cannot_give_up_administration() {
    let app = spawn().await;
    let (me, doctor, admin_role) =
        (app.admin_id().await, role_id(&app, "doctor").await, role_id(&app, "admin").await);
    // Giving themself another role.
    let r = app.put(&format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] })).await;
    assert_error(&r, 409, "last_administrator");
    let roles = app.get(&format!("{USERS}/{me}"), None).await.body["data"]["role_ids"].clone();
    assert_eq!(roles, json!([admin_role]));
    // Taking admin.access from the only role that holds it.
    let kept: Vec<&str> = ["patients.read", "patients.write"].to_vec();
    let r = app.put(&format!("{ROLES}/{admin_role}"), None, json!({ "permissions": kept })).await;
    assert_error(&r, 409, "last_administrator");
    let role = app.get(&format!("{ROLES}/{admin_role}"), None).await;
    assert!(role.body["data"]["permissions"].as_array().unwrap().contains(&json!("admin.access")));
    assert_eq!(administrators(&app).await, 1);
}

#[tokio::test]
async fn administrators_may_step_down_while_another_remains() {
    let app = spawn().await;
    let branch = app.main_branch().await;
    let (me, doctor) = (app.admin_id().await, role_id(&app, "doctor").await);
    let (second, second_token) = app.create_user("second", &["admin"], &[branch]).await;
    assert_eq!(administrators(&app).await, 2);
    // The second demotes the first: one remains.
    let r = app
        .call_as(&second_token, Method::PUT, &format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] }))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The one left may neither demote nor deactivate nor delete themself away.
    let own = format!("{USERS}/{second}");
    let r = app.call_as(&second_token, Method::PUT, &own, None, json!({ "role_ids": [doctor] })).await;
    assert_error(&r, 409, "last_administrator");
    // A third admin appears, deletes (deactivates) the second, and is then the last.
    let (third, third_token) = app.create_user("third", &["admin"], &[branch]).await;
    let r = app.call_as(&third_token, Method::DELETE, &own, None, Value::Null).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = app
        .call_as(
            &third_token,
            Method::PUT,
            &format!("{USERS}/{third}"),
            None,
            json!({ "role_ids": [doctor] }),
        )
        .await;
    assert_error(&r, 409, "last_administrator");
    assert_eq!(administrators(&app).await, 1);
}

/// Sends two requests so that both are inside their transactions, waiting on the lock that
/// changes of who administers take turns on, before either goes on: a true race, not two
/// requests one after the other (the second of which would be refused earlier, with 403).
async fn race(
    app: &TestApp,
    first: reqwest::RequestBuilder,
    second: reqwest::RequestBuilder,
) -> (Reply, Reply) {
    let mut holder = app.state.registry.get().await.unwrap();
    let tx = holder.transaction().await.unwrap();
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&clinic_server::admin::ADMINISTRATORS_LOCK])
        .await
        .unwrap();
    let (a, b) = (tokio::spawn(reply(first)), tokio::spawn(reply(second)));
    let watcher = app.state.registry.get().await.unwrap();
    for _ in 0..1000 {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting == 2 || a.is_finished() || b.is_finished() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tx.rollback().await.unwrap();
    (a.await.unwrap(), b.await.unwrap())
}

#[tokio::test]
async fn two_administrators_demoting_or_deactivating_each_other_at_once_leave_one() {
    let app = spawn().await;
    let branch = app.main_branch().await;
    let (me, doctor, admin_role) =
        (app.admin_id().await, role_id(&app, "doctor").await, role_id(&app, "admin").await);
    let (x, x_token) = app.create_user("xena", &["admin"], &[branch]).await;
    let (y, y_token) = app.create_user("yuri", &["admin"], &[branch]).await;
    // The bootstrap administrator steps down, so that x and y are the only two.
    assert_eq!(app.put(&format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] })).await.status, 200);
    let mut tokens = [(x, x_token), (y, y_token)];
    for round in 0..10 {
        let deactivate = round % 2 == 1;
        let (x_token, y_token) = (tokens[0].1.clone(), tokens[1].1.clone());
        let against = |token: &str, whom: i64| {
            let path = format!("{USERS}/{whom}");
            if deactivate {
                app.request_as(token, Method::DELETE, &path, None)
            } else {
                app.request_as(token, Method::PUT, &path, None).json(&json!({ "role_ids": [doctor] }))
            }
        };
        let (a, b) = race(&app, against(&x_token, y), against(&y_token, x)).await;
        let mut statuses = [a.status, b.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "round {round}: {} / {}", a.text, b.text);
        assert_error(if a.status == 409 { &a } else { &b }, 409, "last_administrator");
        assert_eq!(administrators(&app).await, 1, "round {round}");
        // The one left restores the other for the next round (a deactivated one logs in anew).
        let (winner, loser) = if a.status == 200 { (0, 1) } else { (1, 0) };
        let body = json!({ "role_ids": [admin_role], "active": true });
        let path = format!("{USERS}/{}", tokens[loser].0);
        let back = app.call_as(&tokens[winner].1, Method::PUT, &path, None, body).await;
        assert_eq!(back.status, 200, "{}", back.text);
        let name = if loser == 0 { "xena" } else { "yuri" };
        tokens[loser].1 = app.login(name, "user-password-1").await;
    }
}

/// A role edit that would take admin.access away from one administrator races a demotion of
/// the other: one of the two goes through.
#[tokio::test]
async fn a_role_edit_and_a_demotion_at_once_leave_one_administrator() {
    let app = spawn().await;
    let branch = app.main_branch().await;
    let (me, doctor) = (app.admin_id().await, role_id(&app, "doctor").await);
    let body = json!({ "name": "chief", "permissions": ["admin.access", "patients.read"] });
    let chief = id_of(&app.created(ROLES, None, body).await);
    let (_, x_token) = app.create_user("xena", &["chief"], &[branch]).await;
    let (_, y_token) = app.create_user("yuri", &["admin"], &[branch]).await;
    assert_eq!(app.put(&format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] })).await.status, 200);
    let strip = app
        .request_as(&y_token, Method::PUT, &format!("{ROLES}/{chief}"), None)
        .json(&json!({ "permissions": ["patients.read"] }));
    let yuri: i64 = {
        let client = app.state.registry.get().await.unwrap();
        client.query_one("SELECT id FROM users WHERE username = 'yuri'", &[]).await.unwrap().get(0)
    };
    let demote = app
        .request_as(&x_token, Method::PUT, &format!("{USERS}/{yuri}"), None)
        .json(&json!({ "role_ids": [doctor] }));
    let (a, b) = race(&app, strip, demote).await;
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{} / {}", a.text, b.text);
    assert_eq!(administrators(&app).await, 1);
}
