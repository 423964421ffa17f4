//! The last administrator: never demoted or deactivated, even by racing writes.

use super::*;
use crate::support::assert_status;

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
    assert_status(&r, 200);
    // The one left may neither demote nor deactivate nor delete themself away.
    let own = format!("{USERS}/{second}");
    let r = app.call_as(&second_token, Method::PUT, &own, None, json!({ "role_ids": [doctor] })).await;
    assert_error(&r, 409, "last_administrator");
    // A third admin appears, deletes (deactivates) the second, and is then the last.
    let (third, third_token) = app.create_user("third", &["admin"], &[branch]).await;
    let r = app.call_as(&third_token, Method::DELETE, &own, None, Value::Null).await;
    assert_status(&r, 200);
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
    assert_status(&app.put(&format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] })).await, 200);
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
        assert_status(&back, 200);
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
    assert_status(&app.put(&format!("{USERS}/{me}"), None, json!({ "role_ids": [doctor] })).await, 200);
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
