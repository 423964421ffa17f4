//! Login, the profile, switching branches and tokens.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Login (rules 1, 2, 4)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn login_identifies_by_username_and_never_by_email() {
    let app = spawn_relaxed().await;
    let (id, _) = app.create_user("ursula", &["nurse"], &[]).await;
    let r = app.login_reply("ursula@example.test", USER_PASSWORD).await;
    assert_status(&r, 401);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
    let r = app.login_reply("ursula", USER_PASSWORD).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["user"]["id"], id);
    assert_eq!(r.body["data"]["user"]["username"], "ursula");
    assert_eq!(r.body["data"]["user"]["email"], "ursula@example.test");
}

#[tokio::test]
async fn login_with_an_email_field_instead_of_username_does_not_log_in() {
    let app = spawn_relaxed().await;
    app.create_user("victor", &["nurse"], &[]).await;
    let r = reply(
        app.http
            .post(app.url(LOGIN))
            .json(&json!({ "email": "victor@example.test", "password": USER_PASSWORD })),
    )
    .await;
    assert!(r.body["data"]["token"].is_null(), "no token without a username: {}", r.text);
    assert_invalid(&r, &["username"]);
}

#[tokio::test]
async fn wrong_password_and_unknown_user_are_401_exactly_invalid_credentials() {
    let app = spawn_relaxed().await;
    app.create_user("wendy", &["nurse"], &[]).await;
    let tries =
        [("wendy", "wrong-password-9"), ("admin", "not-the-password"), ("nobody-at-all", USER_PASSWORD)];
    for (user, password) in tries {
        let r = app.login_reply(user, password).await;
        assert_status(&r, 401);
        assert_eq!(r.body, json!({ "message": "Invalid credentials" }), "{user}");
        assert!(r.header("content-type").unwrap_or_default().starts_with("application/json"));
    }
}

#[tokio::test]
async fn an_unknown_user_costs_one_password_check_like_a_wrong_password() {
    // Timing would tell which usernames exist if an unknown one skipped the hash: each login
    // checks exactly one password, the unknown user's against a decoy of the same cost.
    let app = spawn_relaxed().await;
    app.create_user("tim", &["nurse"], &[]).await;
    for username in ["tim", "nobody-by-that-name"] {
        let before = app.state.hasher.checked();
        let r = app.login_reply(username, "wrong-password-1").await;
        assert_status(&r, 401);
        assert_eq!(app.state.hasher.checked() - before, 1, "{username}");
    }
}

#[tokio::test]
async fn inactive_user_cannot_log_in() {
    let app = spawn_relaxed().await;
    let (id, _) = app.create_user("xena", &["nurse"], &[]).await;
    {
        let client = app.state.registry.get().await.unwrap();
        client.execute("UPDATE users SET active = false WHERE id = $1", &[&id]).await.unwrap();
    }
    let r = app.login_reply("xena", USER_PASSWORD).await;
    assert_status(&r, 401);
    assert_eq!(r.body, json!({ "message": "Invalid credentials" }));
}

#[tokio::test]
async fn auth_routes_without_a_valid_token_are_401() {
    let app = spawn_relaxed().await;
    let routes = [
        (Method::GET, PROFILE),
        (Method::PUT, PROFILE),
        (Method::POST, LOGOUT),
        (Method::POST, SWITCH),
        (Method::GET, MY_BRANCHES),
        (Method::POST, CHANGE_PASSWORD),
    ];
    for (method, path) in routes {
        let r = reply(app.http.request(method.clone(), app.url(path)).json(&json!({}))).await;
        assert_error(&r, 401, "unauthenticated");
        let r = reply(app.request_as("1|not-a-token", method.clone(), path, None).json(&json!({}))).await;
        assert_error(&r, 401, "unauthenticated");
    }
}

// ---------------------------------------------------------------------------------------
// Profile
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn profile_returns_the_current_user() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::GET, PROFILE, None)).await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["id"], app.admin_id().await);
    assert_eq!(data["username"], "admin");
    assert_eq!(data["default_branch_id"], main);
    assert!(data["name"].as_str().is_some_and(|n| !n.is_empty()), "{data}");
    assert!(data["email"].as_str().is_some_and(|e| e.contains('@')), "{data}");
    assert!(data.get("password").is_none() && data.get("password_hash").is_none(), "{data}");

    let branch = app.create_branch("PROF").await;
    let (id, token) = api_user(&app, "yusuf", "nurse", &[branch]).await;
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_status(&r, 200);
    let data = &r.body["data"];
    assert_eq!(data["id"], id);
    assert_eq!(data["name"], "User yusuf");
    assert_eq!(data["email"], "yusuf@example.test");
    assert_eq!(data["username"], "yusuf");
    assert_eq!(data["default_branch_id"], branch);
}

#[tokio::test]
async fn profile_update_validates_and_persists() {
    let app = spawn_relaxed().await;
    let (id, token) = app.create_user("zara", &["nurse"], &[]).await;
    app.create_user("other", &["nurse"], &[]).await;
    let put = |body: Value| app.request_as(&token, Method::PUT, PROFILE, None).json(&body);

    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "not-an-email" }))).await, &["email"]);
    assert_invalid(&reply(put(json!({ "email": "zara2@example.test" }))).await, &["name"]);
    assert_invalid(&reply(put(json!({ "name": "   ", "email": "zara2@example.test" }))).await, &["name"]);
    assert_invalid(&reply(put(json!({ "name": "Zara Z" }))).await, &["email"]);
    // Another user's e-mail, in any case.
    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "other@example.test" }))).await, &["email"]);
    assert_invalid(&reply(put(json!({ "name": "Zara Z", "email": "OTHER@Example.TEST" }))).await, &["email"]);
    // Nothing changed so far.
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.body["data"]["name"], "zara");
    assert_eq!(r.body["data"]["email"], "zara@example.test");

    let r = reply(put(json!({ "name": "Zara Zed", "email": "zara.zed@example.test" }))).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["id"], id);
    assert_eq!(r.body["data"]["name"], "Zara Zed");
    assert_eq!(r.body["data"]["email"], "zara.zed@example.test");
    assert_eq!(r.body["data"]["username"], "zara", "the username is not changed by the profile");

    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.body["data"]["name"], "Zara Zed");
    assert_eq!(r.body["data"]["email"], "zara.zed@example.test");
    let r = app.login_reply("zara", USER_PASSWORD).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["user"]["name"], "Zara Zed");
    assert_eq!(r.body["data"]["user"]["email"], "zara.zed@example.test");
    // Keeping one's own e-mail is no conflict.
    let r = reply(put(json!({ "name": "Zara Zee", "email": "zara.zed@example.test" }))).await;
    assert_status(&r, 200);
}

// ---------------------------------------------------------------------------------------
// Branches of the user, switching (rule 7)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn switch_branch_validates_checks_access_and_changes_the_default() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let east = app.create_branch("EAST").await;
    let west = app.create_branch("WEST").await;
    let (_, token) = api_user(&app, "sam", "nurse", &[main, east]).await;
    let switch = |body: Value| app.request_as(&token, Method::POST, SWITCH, None).json(&body);

    assert_invalid(&reply(switch(json!({ "branch_id": "x" }))).await, &["branch_id"]);
    assert_invalid(&reply(switch(json!({}))).await, &["branch_id"]);
    assert_invalid(&reply(switch(json!({ "branch_id": null }))).await, &["branch_id"]);

    let r = reply(switch(json!({ "branch_id": west }))).await;
    assert_status(&r, 403); // a branch not granted
    let r = reply(switch(json!({ "branch_id": 987_654 }))).await;
    assert_status(&r, 403); // a branch that does not exist
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.body["data"]["default_branch_id"], main, "refusals change nothing");

    let r = reply(switch(json!({ "branch_id": east }))).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.body["data"]["default_branch_id"], east);
    let r = app.login_reply("sam", USER_PASSWORD).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["user"]["default_branch_id"], east);
    // And back.
    let r = reply(switch(json!({ "branch_id": main }))).await;
    assert_status(&r, 200);
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_eq!(r.body["data"]["default_branch_id"], main);
}

#[tokio::test]
async fn switching_to_an_archived_branch_is_403() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let old = app.create_branch("OLD").await;
    let (_, token) = api_user(&app, "tina", "nurse", &[main, old]).await;
    let r = reply(app.request(Method::DELETE, &format!("/api/v1/branches/{old}"), None)).await;
    assert_status(&r, 200); // archive
    let r =
        reply(app.request_as(&token, Method::POST, SWITCH, None).json(&json!({ "branch_id": old }))).await;
    assert_status(&r, 403);
}

#[tokio::test]
async fn my_branches_lists_only_granted_active_branches() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let b1 = app.create_branch("BONE").await;
    let b2 = app.create_branch("BTWO").await;
    let b3 = app.create_branch("BTHREE").await;
    let (_, token) = api_user(&app, "uma", "nurse", &[main, b1, b2]).await;

    let r = reply(app.request_as(&token, Method::GET, MY_BRANCHES, None)).await;
    assert_status(&r, 200);
    assert_eq!(ids_of(&r.body["data"]), BTreeSet::from([main, b1, b2]), "{}", r.text);
    let one = r.body["data"].as_array().unwrap().iter().find(|b| b["id"] == b1).unwrap();
    assert_eq!(one["code"], "BONE");
    assert_eq!(one["name"], "Branch BONE");
    assert!(!ids_of(&r.body["data"]).contains(&b3));

    let r = reply(app.request(Method::DELETE, &format!("/api/v1/branches/{b2}"), None)).await;
    assert_status(&r, 200); // archive
    let r = reply(app.request_as(&token, Method::GET, MY_BRANCHES, None)).await;
    assert_status(&r, 200);
    assert_eq!(ids_of(&r.body["data"]), BTreeSet::from([main, b1]), "archived branch left: {}", r.text);
    let r = app.login_reply("uma", USER_PASSWORD).await;
    assert_eq!(ids_of(&r.body["data"]["branches"]), BTreeSet::from([main, b1]), "{}", r.text);
    // The admin's list too.
    let r = reply(app.request(Method::GET, MY_BRANCHES, None)).await;
    assert!(!ids_of(&r.body["data"]).contains(&b2), "{}", r.text);
    assert!(ids_of(&r.body["data"]).contains(&b3), "{}", r.text);
}

// ---------------------------------------------------------------------------------------
// Tokens (rule 3, logout, DESIGN security)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn logout_revokes_only_the_presented_token() {
    let app = spawn_relaxed().await;
    let main = app.main_branch().await;
    let (_, first) = app.create_user("lou", &["nurse"], &[main]).await;
    let second = app.login("lou", USER_PASSWORD).await;
    // Both are cached as valid before the logout, on an auth route and on a branch route.
    for token in [&first, &second] {
        assert_status(&app.profile_as(token).await, 200);
        let r = reply(app.request_as(token, Method::GET, PATIENTS, Some(main))).await;
        assert_status(&r, 200);
    }

    let r = reply(app.request_as(&first, Method::POST, LOGOUT, None)).await;
    assert_status(&r, 200);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.text);

    let r = reply(app.request_as(&first, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&first, Method::GET, PATIENTS, Some(main))).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&first, Method::POST, LOGOUT, None)).await;
    assert_error(&r, 401, "unauthenticated");
    assert_status(&app.profile_as(&second).await, 200); // the user's other token still works
    let r = reply(app.request_as(&second, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200); // the user's other token still works in a branch
    assert_status(&app.profile_as(&app.admin_token).await, 200); // other users are untouched
    let r = app.get(PATIENTS, Some(main)).await;
    assert_status(&r, 200); // other users are untouched in a branch
    let (first_id, _) = first.split_once('|').unwrap();
    let client = app.state.registry.get().await.unwrap();
    let left: i64 = client
        .query_one("SELECT count(*) FROM api_tokens WHERE id = $1", &[&first_id.parse::<i64>().unwrap()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the revoked token is gone from the registry");
}

#[tokio::test]
async fn tokens_have_no_expiry_by_default() {
    let app = spawn_relaxed().await;
    let (id, _) = app.admin_token.split_once('|').unwrap();
    let client = app.state.registry.get().await.unwrap();
    let expires: Option<time::OffsetDateTime> = client
        .query_one("SELECT expires_at FROM api_tokens WHERE id = $1", &[&id.parse::<i64>().unwrap()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(expires, None);
}

#[tokio::test]
async fn tokens_expire_after_the_configured_expiry() {
    // Thirty minutes (the setting is in minutes); the token's row is then aged past them.
    let app = TestApp::spawn_with(|s| s.token_expiry = Some(Duration::from_secs(30 * 60))).await;
    let main = app.main_branch().await;
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    let id: i64 = token.split_once('|').unwrap().0.parse().unwrap();
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_status(&r, 200); // a fresh token works
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await;
    assert_status(&r, 200); // a fresh token works in a branch
    {
        let client = app.state.registry.get().await.unwrap();
        let seconds: f64 = client
            .query_one(
                "SELECT EXTRACT(EPOCH FROM expires_at - created_at)::float8 FROM api_tokens WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0);
        assert!((1798.0..=1802.0).contains(&seconds), "token lifetime {seconds} s, expected 1800 s");
        // Issued thirty minutes and a second ago.
        client
            .execute(
                "UPDATE api_tokens SET created_at = created_at - interval '1801 seconds',
                        expires_at = expires_at - interval '1801 seconds'
                  WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
    }
    // The cached record goes, as after any change to the row (or once the cache's own time
    // limit is over).
    app.state.forget(&[clinic_server::notify::Topic::Token(id)]).await;
    let r = reply(app.request_as(&token, Method::GET, PROFILE, None)).await;
    assert_error(&r, 401, "unauthenticated");
    let r = reply(app.request_as(&token, Method::GET, PATIENTS, Some(main))).await;
    assert_error(&r, 401, "unauthenticated");
    assert_status(&app.profile_as(&app.admin_token).await, 200); // another token keeps its own expiry
}

#[tokio::test]
async fn tokens_are_stored_as_sha256_of_the_secret_only() {
    let app = spawn_relaxed().await;
    let token = app.login("admin", crate::support::ADMIN_PASSWORD).await;
    let (id, secret) = token.split_once('|').expect("token is <id>|<secret>");
    let id: i64 = id.parse().expect("token id is an integer");
    assert!(secret.len() >= 43, "secret too short for 256 bits: {secret}");
    let client = app.state.registry.get().await.unwrap();
    let stored: Vec<String> = client
        .query("SELECT encode(secret_hash, 'hex') FROM api_tokens", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!stored.is_empty());
    for hash in &stored {
        assert_ne!(hash, secret, "a raw secret is stored");
        assert!(!hash.contains(secret), "a raw secret is stored");
    }
    let leaked: i64 = client
        .query_one(
            "SELECT count(*) FROM api_tokens t WHERE strpos(row_to_json(t)::text, $1) > 0
                OR strpos(encode(t.secret_hash, 'escape'), $1) > 0",
            &[&secret],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaked, 0, "the raw secret appears in api_tokens");
    let matches: bool = client
        .query_one(
            "SELECT secret_hash = sha256(convert_to($2, 'UTF8')) FROM api_tokens WHERE id = $1",
            &[&id, &secret],
        )
        .await
        .unwrap()
        .get(0);
    assert!(matches, "the stored hash is not SHA-256 of the secret");
}

#[tokio::test]
async fn passwords_are_stored_as_argon2id_phc_strings() {
    let app = spawn_relaxed().await;
    app.create_user("pia", &["nurse"], &[]).await;
    let client = app.state.registry.get().await.unwrap();
    for (user, password) in [("admin", crate::support::ADMIN_PASSWORD), ("pia", USER_PASSWORD)] {
        let hash: String = client
            .query_one("SELECT password_hash FROM users WHERE username = $1", &[&user])
            .await
            .unwrap()
            .get(0);
        assert!(hash.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{user}: {hash}");
        assert!(!hash.contains(password), "{user}: the password is stored");
    }
}
