//! Wildcards that survive no normalisation, and the audit trails a clinic must see.

use super::*;

// ---------------------------------------------------------------------------------------
// 5. Wildcards survive no normalisation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn fullwidth_wildcards_in_a_search_match_only_themselves() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    app.create_patient(branch, "Ana", "Cruz").await;
    app.create_patient(branch, "Bea", "Santos").await;
    let encode = |term: &str| form_urlencoded::byte_serialize(term.as_bytes()).collect::<String>();
    for term in ["\u{FF3F}\u{FF3F}\u{FF3F}", "\u{FF05}", "a\u{FF05}", "_", "%"] {
        // The list's search matches text literally, wildcards included.
        let r = app.get(&format!("/api/v1/patients?search={}", encode(term)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"].as_array().unwrap().len(), 0, "search {term}: {}", r.text);
    }
    // The type-ahead matches the starts of words: punctuation, wildcards included, only
    // separates words, so alone it matches nothing and beside a letter it is that letter.
    for term in ["\u{FF3F}\u{FF3F}\u{FF3F}", "\u{FF05}", "_", "%", "%_%"] {
        let r = app.get(&format!("/api/v1/patients/search?search={}", encode(term)), Some(branch)).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"].as_array().unwrap().len(), 0, "type-ahead {term}: {}", r.text);
    }
    let r = app.get(&format!("/api/v1/patients/search?search={}", encode("a\u{FF05}")), Some(branch)).await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 1, "{}", r.text);
    assert_eq!(r.body["data"][0]["first_name"], "Ana");
    let r = app.get("/api/v1/patients?search=cruz", Some(branch)).await;
    assert_eq!(r.body["meta"]["total"], 1);
}

// ---------------------------------------------------------------------------------------
// 6. What a clinic must see in its audit trails
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn grants_are_audited_as_they_are_after_the_change() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let north = app.create_branch("NORTH").await;
    let id = user(&app, "gus", "gus@clinic.test").await;
    let r = app
        .put(&format!("/api/v1/users/{id}"), None, json!({ "role_ids": [3, 4], "branch_ids": [main, north] }))
        .await;
    assert_status(&r, 200);
    let rows = app.audit_rows(SYSTEM_AUDIT, None, "users", id).await;
    let update = rows.iter().rev().find(|r| r["action"] == "update").expect("an update row");
    let mut roles: Vec<i64> =
        update["after"]["role_ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    roles.sort();
    assert_eq!(roles, [3, 4], "{update}");
    let mut branches: Vec<i64> =
        update["after"]["branch_ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    branches.sort();
    let mut expected = vec![main, north];
    expected.sort();
    assert_eq!(branches, expected, "{update}");
    assert_eq!(update["before"]["role_ids"], json!([2]));
}

#[tokio::test]
async fn sign_ins_sign_outs_and_password_changes_are_audited() {
    let (app, smtp) = with_mail(|_| {}).await;
    let id = user(&app, "ivy", "ivy@clinic.test").await;
    assert_status(
        &reply(
            app.http
                .post(app.url("/api/v1/auth/login"))
                .json(&json!({ "username": "ivy", "password": "wrong-password-1" })),
        )
        .await,
        401,
    );
    let token = app.login("ivy", "a-long-password-9").await;
    let r = app
        .call_as(
            &token,
            Method::POST,
            "/api/v1/profile/change-password",
            None,
            json!({ "current_password": "a-long-password-9", "password": "another-password-8",
                    "password_confirmation": "another-password-8" }),
        )
        .await;
    assert_status(&r, 200);
    let token = app.login("ivy", "another-password-8").await;
    assert_status(&app.call_as(&token, Method::POST, "/api/v1/auth/logout", None, Value::Null).await, 200);
    assert_status(&public(&app, RESET_CODE, json!({ "email": "ivy@clinic.test" })).await, 200);
    let code = code_in(&smtp.wait_for(1).await[0].text);
    let r = public(
        &app,
        RESET_PASSWORD,
        json!({ "email": "ivy@clinic.test", "code": code, "password": "third-password-77",
                "password_confirmation": "third-password-77" }),
    )
    .await;
    assert_status(&r, 200);
    let actions: Vec<String> = app
        .audit_rows(SYSTEM_AUDIT, None, "users", id)
        .await
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["login_failed", "login", "password_change", "logout", "reset_code", "password_reset"] {
        assert!(actions.iter().any(|a| a == expected), "{expected} missing from {actions:?}");
    }
    // The trail never holds a secret.
    let all = app.get(&format!("{SYSTEM_AUDIT}?perPage=100"), None).await;
    for secret in
        ["a-long-password-9", "another-password-8", "third-password-77", code.as_str(), token.as_str()]
    {
        assert!(!all.text.contains(secret), "the audit trail holds a secret");
    }
}

#[tokio::test]
async fn patient_lists_searches_and_type_ahead_record_who_saw_which_patients() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let ana = id_of(&app.create_patient(branch, "Ana", "Cruz").await);
    let bea = id_of(&app.create_patient(branch, "Bea", "Cruz").await);
    let _cy = id_of(&app.create_patient(branch, "Cy", "Santos").await);
    let (nurse_id, nurse) = app.create_user("nina", &["nurse"], &[branch]).await;
    for path in
        ["/api/v1/patients?search=cruz", "/api/v1/patients/search?search=cruz", "/api/v1/patients?perPage=2"]
    {
        assert_status(&app.call_as(&nurse, Method::GET, path, Some(branch), Value::Null).await, 200);
    }
    let r = app
        .get(
            &format!(
                "/api/v1/audit-logs?perPage=100&filters[user_id]={nurse_id}&sortField=id&sortDirection=asc"
            ),
            Some(branch),
        )
        .await;
    assert_status(&r, 200);
    let rows = r.body["data"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{}", r.text);
    let seen = |row: &Value| -> Vec<i64> {
        let mut ids: Vec<i64> =
            row["after"]["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        ids.sort();
        ids
    };
    assert_eq!(rows[0]["action"], "search");
    assert_eq!(seen(&rows[0]), [ana, bea]);
    assert_eq!(rows[1]["action"], "search");
    assert_eq!(seen(&rows[1]), [ana, bea]);
    assert_eq!(rows[2]["action"], "list");
    assert_eq!(seen(&rows[2]).len(), 2);
}

#[tokio::test]
async fn the_registry_trail_is_read_by_administrators_only_with_the_usual_filters() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let id = user(&app, "otto", "otto@clinic.test").await;
    let r = app.get(&format!("{SYSTEM_AUDIT}?filters[action]=create&filters[resource]=users"), None).await;
    assert_status(&r, 200);
    assert!(r.body["data"].as_array().unwrap().iter().any(|row| row["record_id"] == id), "{}", r.text);
    assert!(r.body["data"].as_array().unwrap().iter().all(|row| row["action"] == "create"));
    let r = app.get(&format!("{SYSTEM_AUDIT}?filters[colour]=red"), None).await;
    assert_status(&r, 422);
    let (_, doctor) = app.create_user("dora", &["doctor"], &[branch]).await;
    assert_error(&app.call_as(&doctor, Method::GET, SYSTEM_AUDIT, None, Value::Null).await, 403, "forbidden");
}
