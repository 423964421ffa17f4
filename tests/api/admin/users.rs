//! Users: creation, validation, passwords, deactivation, roles and branches; audited
//! admin writes.

use super::*;
use crate::support::assert_status;

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
    assert_status(&r, 201);
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
    assert_status(&r, 200);
    assert_no_password_fields(&r.body);
    let r = app.get(&format!("{USERS}?perPage=100"), None).await;
    assert_status(&r, 200);
    assert_no_password_fields(&r.body);
    assert!(ids(&r.body["data"]).contains(&id));

    let r = app.login_reply("nina", password).await;
    assert_status(&r, 200); // the new user logs in
    assert_eq!(r.body["data"]["user"]["id"], id);
    assert_eq!(ids(&r.body["data"]["branches"]), BTreeSet::from([main, second]), "{}", r.text);
    // Without a default given, a user starts in the first branch granted (the lowest id).
    assert_eq!(r.body["data"]["user"]["default_branch_id"].as_i64(), Some(main.min(second)));
    let token = r.body["data"]["token"].as_str().unwrap().to_owned();
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/branches", None)).await;
    assert_eq!(ids(&r.body["data"]), BTreeSet::from([main, second]), "{}", r.text);
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await, 200);
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(third))).await, 403);
    // The nurse role gives no administration.
    assert_status(&reply(app.request_as(&token, Method::GET, USERS, None)).await, 403);

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
    assert_status(&r, 201);

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
    assert_status(&r, 201);
    let client = app.state.registry.get().await.unwrap();
    let users: i64 = client.query_one("SELECT count(*) FROM users", &[]).await.unwrap().get(0);
    assert_eq!(users, 3, "admin, nina and nina2 only");
}

#[tokio::test]
async fn user_password_change_by_admin_ends_their_sessions() {
    let app = spawn().await;
    let (id, token) = app.create_user("paul", &["nurse"], &[]).await;
    assert_status(&app.profile_as(&token).await, 200);
    assert_invalid(
        &app.put(&format!("{USERS}/{id}"), None, json!({ "password": "short" })).await,
        &["password"],
    );
    assert_status(&app.profile_as(&token).await, 200); // a refused change ends nothing

    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "password": "fresh-password-9" })).await;
    assert_status(&r, 200);
    assert_no_password_fields(&r.body);
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_status(&app.login_reply("paul", USER_PASSWORD).await, 401);
    assert_status(&app.login_reply("paul", "fresh-password-9").await, 200);
    assert_status(&app.profile_as(&app.admin_token).await, 200);
}

#[tokio::test]
async fn user_deactivated_by_update_is_locked_out_at_once() {
    let app = spawn().await;
    let (id, token) = app.create_user("dana", &["nurse"], &[]).await;
    assert_status(&app.profile_as(&token).await, 200); // cached as valid first
    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "active": false })).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["active"], false);
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = app.login_reply("dana", USER_PASSWORD).await;
    assert_status(&r, 401);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    // Reactivated, they may log in again.
    let r = app.put(&format!("{USERS}/{id}"), None, json!({ "active": true })).await;
    assert_status(&r, 200);
    assert_status(&app.login_reply("dana", USER_PASSWORD).await, 200);
}

#[tokio::test]
async fn user_delete_deactivates() {
    let app = spawn().await;
    let (id, token) = app.create_user("dora", &["nurse"], &[]).await;
    assert_status(&app.profile_as(&token).await, 200);
    let r = app.delete(&format!("{USERS}/{id}"), None).await;
    assert_status(&r, 200);
    assert_message(&r);
    let r = app.get(&format!("{USERS}/{id}"), None).await;
    assert_status(&r, 200); // the account is kept
    assert_eq!(r.body["data"]["active"], false);
    assert_eq!(r.body["data"]["username"], "dora");
    let r = reply(app.request_as(&token, Method::GET, "/api/v1/auth/profile", None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = app.login_reply("dora", USER_PASSWORD).await;
    assert_status(&r, 401);
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
    assert_status(&app.profile_as(&app.admin_token).await, 200);
    let client = app.state.registry.get().await.unwrap();
    let active: bool =
        client.query_one("SELECT active FROM users WHERE id = $1", &[&admin]).await.unwrap().get(0);
    assert!(active);
    assert_status(&app.login_reply("admin", crate::support::ADMIN_PASSWORD).await, 200);
}

#[tokio::test]
async fn user_roles_and_branches_changes_apply_at_once() {
    let app = spawn().await;
    let main = app.main_branch().await;
    let second = app.create_branch("ROLEB").await;
    let (id, token) = app.create_user("rudy", &["nurse"], &[main]).await;
    assert_status(&reply(app.request_as(&token, Method::GET, ROLES, None)).await, 403);
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await, 403);

    let admin_role = role_id(&app, "admin").await;
    let r = app
        .put(&format!("{USERS}/{id}"), None, json!({ "role_ids": [admin_role], "branch_ids": [second] }))
        .await;
    assert_status(&r, 200);
    assert_eq!(int_list(&r.body["data"]["role_ids"]), vec![admin_role]);
    assert_eq!(int_list(&r.body["data"]["branch_ids"]), vec![second]);
    assert_status(&reply(app.request_as(&token, Method::GET, ROLES, None)).await, 200);
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(second))).await, 200);
    assert_status(&reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await, 403);
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
    assert_status(
        &app.put(&format!("{ROLES}/{role}"), None, json!({ "permissions": ["queue.write"] })).await,
        200,
    );
    assert_status(&app.delete(&format!("{ROLES}/{role}"), None).await, 200);

    let branch = id_of(&app.post(BRANCHES, None, json!({ "code": "AUD", "name": "Audited" })).await);
    assert_status(&app.put(&format!("{BRANCHES}/{branch}"), None, json!({ "name": "Audited 2" })).await, 200);
    assert_status(&app.delete(&format!("{BRANCHES}/{branch}"), None).await, 200);

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
    assert_status(&app.put(&format!("{USERS}/{user}"), None, json!({ "name": "Audrey B" })).await, 200);
    assert_status(
        &app.put(&format!("{USERS}/{user}"), None, json!({ "password": "another-password-2" })).await,
        200,
    );

    let service = new_service(&app, main, "Triage", "T").await;
    let services = format!("{BRANCHES}/{main}/services/{service}");
    assert_status(&app.put(&services, None, json!({ "name": "Triage 2" })).await, 200);
    assert_status(&app.post(&format!("{services}/staff"), None, json!({ "user_id": user })).await, 200);
    assert_status(&app.delete(&format!("{services}/staff/{user}"), None).await, 200);
    assert_status(&app.delete(&services, None).await, 200);
    assert_status(&app.delete(&format!("{USERS}/{user}"), None).await, 200);

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
    assert_status(&r, 201);
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
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["active"], true);
}
