//! The admin routes' permission `admin.access`, and roles with their permissions.

use super::*;
use crate::support::assert_status;

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
        assert_status(&r, 403);
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
    assert_status(&r, 200);
}

#[tokio::test]
async fn the_permission_not_the_role_name_opens_the_admin_routes() {
    let app = spawn().await;
    let r = app.post(ROLES, None, json!({ "name": "operators", "permissions": ["admin.access"] })).await;
    assert_status(&r, 201);
    let (_, token) = app.create_user("opal", &["operators"], &[]).await;
    for path in [ROLES, USERS, BRANCHES, PERMISSIONS] {
        let r = reply(app.request_as(&token, Method::GET, path, None)).await;
        assert_status(&r, 200);
    }
}

// ---------------------------------------------------------------------------------------
// Roles and permissions
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn roles_list_is_paginated_and_holds_the_default_roles() {
    let app = spawn().await;
    let r = app.get(ROLES, None).await;
    assert_status(&r, 200);
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
    assert_status(&r, 200);
    assert_eq!(r.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(r.body["meta"]["from"], 5);
    assert!(r.body["links"]["prev"].is_string() && r.body["links"]["next"].is_null(), "{}", r.text);
}

#[tokio::test]
async fn admin_role_holds_every_permission_of_the_catalogue() {
    let app = spawn().await;
    let r = app.get(PERMISSIONS, None).await;
    assert_status(&r, 200);
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
    assert_status(&r, 200);
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
    assert_status(&r, 201);
    assert_message(&r);
    let id = id_of(&r);
    assert_eq!(r.body["data"]["name"], "front office");
    assert_eq!(r.body["data"]["description"], "Desk and till");
    assert_eq!(r.body["data"]["permissions"], json!(["billing.read", "patients.read", "patients.write"]));
    let r = app.get(&format!("{ROLES}/{id}"), None).await;
    assert_status(&r, 200);
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
    assert_status(&r, 201);
    let role = id_of(&r);
    let (_, token) = app.create_user("vera", &["viewer"], &[main]).await;
    let list = || app.request_as(&token, Method::GET, PATIENTS, Some(main));
    assert_status(&reply(list()).await, 403); // no patients.read yet

    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": ["patients.read"] })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["permissions"], json!(["patients.read"]));
    assert_eq!(r.body["data"]["name"], "viewer", "fields not sent are kept");
    let r = reply(list()).await;
    assert_status(&r, 200); // the holder gains access without logging in again
    let r = reply(app.request_as(&token, Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "A", "last_name": "B", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_status(&r, 403); // reading is not writing

    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": [] })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["permissions"], json!([]));
    assert_status(&reply(list()).await, 403); // the holder loses access at once

    // Renaming keeps the permissions; an unknown permission changes nothing.
    let r = app.put(&format!("{ROLES}/{role}"), None, json!({ "name": "viewers" })).await;
    assert_status(&r, 200);
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
    assert_status(&app.get(&format!("{ROLES}/{held}"), None).await, 200); // the held role is kept
    assert_status(&app.profile_as(&token).await, 200);

    let r = app.delete(&format!("{ROLES}/{spare}"), None).await;
    assert_status(&r, 200);
    assert_message(&r);
    assert_error(&app.get(&format!("{ROLES}/{spare}"), None).await, 404, "not_found");
    assert_error(&app.delete(&format!("{ROLES}/{spare}"), None).await, 404, "not_found");
    let r = app.get(ROLES, None).await;
    assert_eq!(r.body["meta"]["total"], 7, "{}", r.text);
}
