//! Errors: unknown routes and methods, bad bodies and values, each a JSON error and never a
//! 500.

use super::*;
use crate::support::assert_status;

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_route_is_404_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    assert_error(
        &reply(app.request(Method::GET, "/api/v1/no-such-thing", Some(main))).await,
        404,
        "not_found",
    );
    assert_error(&reply(app.request(Method::GET, "/nowhere", None)).await, 404, "not_found");
    assert_error(&reply(app.http.get(app.url("/api/v2/patients"))).await, 404, "not_found");
}

#[tokio::test]
async fn wrong_method_on_a_known_path_is_405_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let patient = new_patient(&app, main, "A", "B", "female").await;
    assert_error(
        &reply(app.request(Method::PATCH, &format!("{PATIENTS}/{}", id_of(&patient)), Some(main))).await,
        405,
        "method_not_allowed",
    );
    assert_error(&reply(app.request(Method::DELETE, PATIENTS, Some(main))).await, 405, "method_not_allowed");
    assert_error(&reply(app.http.get(app.url(LOGIN))).await, 405, "method_not_allowed");
}

#[tokio::test]
async fn malformed_json_body_is_400_invalid_json() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(
        app.request(Method::POST, PATIENTS, Some(main))
            .header("content-type", "application/json")
            .body(r#"{"first_name": "Ana", "last_name": "#),
    )
    .await;
    assert_error(&r, 400, "invalid_json");
    let patient = new_patient(&app, main, "A", "B", "female").await;
    let r = reply(
        app.request(Method::PUT, &format!("{PATIENTS}/{}", id_of(&patient)), Some(main))
            .header("content-type", "application/json")
            .body("{nope}"),
    )
    .await;
    assert_error(&r, 400, "invalid_json");
}

#[tokio::test]
async fn json_array_body_is_400() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r =
        reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!([{ "first_name": "Ana" }]))).await;
    assert_error(&r, 400, "invalid_json");
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!("a string"))).await;
    assert_error(&r, 400, "invalid_json");
}

#[tokio::test]
async fn body_declared_as_text_plain_is_415() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(
        app.request(Method::POST, PATIENTS, Some(main))
            .header("content-type", "text/plain")
            .body(r#"{"first_name":"Ana","last_name":"Cruz","birth_date":"1980-01-02","sex":"female"}"#),
    )
    .await;
    assert_error(&r, 415, "unsupported_media_type");
    let r = list_patients(&app, main, "").await;
    assert_eq!(r.body["meta"]["total"], 0, "nothing was created");
}

#[tokio::test]
async fn body_larger_than_the_limit_is_413_json() {
    let app = TestApp::spawn_with(|s| s.max_body_bytes = 1024).await;
    let main = app.main_branch().await;
    let body = json!({
        "first_name": "Ana",
        "last_name": "Cruz",
        "birth_date": "1980-01-02",
        "sex": "female",
        "notes": "x".repeat(4096),
    });
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&body)).await;
    assert_error(&r, 413, "payload_too_large");
    // Under the limit is fine.
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ana", "last_name": "Cruz", "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_status(&r, 201);
}

#[tokio::test]
async fn missing_required_patient_fields_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({}))).await;
    assert_invalid(&r, &["birth_date", "first_name", "last_name", "sex"]);
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "  ", "last_name": null, "birth_date": "1980-01-02", "sex": "female",
    })))
    .await;
    assert_invalid(&r, &["first_name", "last_name"]);
}

#[tokio::test]
async fn invalid_patient_values_are_each_named() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "A".repeat(101),
        "last_name": "Valid",
        "birth_date": "2999-01-01",
        "sex": "robot",
        "email": "not-an-email",
    })))
    .await;
    assert_invalid(&r, &["birth_date", "email", "first_name", "sex"]);
    // A date that does not exist, and a wrong type.
    let r = reply(app.request(Method::POST, PATIENTS, Some(main)).json(&json!({
        "first_name": "Ana", "last_name": 42, "birth_date": "1980-02-30", "sex": "female",
    })))
    .await;
    assert_invalid(&r, &["birth_date", "last_name"]);
    // Updates are validated too, and a failed one changes nothing.
    let patient = new_patient(&app, main, "Ana", "Cruz", "female").await;
    let path = format!("{PATIENTS}/{}", id_of(&patient));
    let r = reply(
        app.request(Method::PUT, &path, Some(main)).json(&json!({ "sex": "robot", "first_name": "Ann" })),
    )
    .await;
    assert_invalid(&r, &["sex"]);
    let r = reply(app.request(Method::GET, &path, Some(main))).await;
    assert_eq!(r.body["data"]["first_name"], "Ana");
    assert_eq!(r.body["data"]["sex"], "female");
}

#[tokio::test]
async fn every_error_body_is_json_with_message_and_code_and_never_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    let other = app.create_branch("OTHER").await;
    let (_, outsider) = app.create_user("outsider", &["nurse"], &[main]).await;
    let cases: Vec<(reqwest::RequestBuilder, u16)> = vec![
        (app.http.get(app.url(PATIENTS)).header("x-branch-id", main.to_string()), 401),
        (app.request_as("1|nonsense", Method::GET, PATIENTS, Some(main)), 401),
        (app.request(Method::GET, PATIENTS, None), 400),
        (app.request(Method::GET, PATIENTS, None).header("x-branch-id", "abc"), 400),
        (app.request_as(&outsider, Method::GET, PATIENTS, Some(other)), 403),
        (app.request(Method::GET, &format!("{PATIENTS}/999999"), Some(main)), 404),
        (app.request(Method::GET, &format!("{PATIENTS}/abc"), Some(main)), 404),
        (app.request(Method::GET, "/api/v1/nothing-here", Some(main)), 404),
        (app.request(Method::PATCH, PATIENTS, Some(main)), 405),
        (
            app.request(Method::POST, PATIENTS, Some(main))
                .header("content-type", "application/json")
                .body("{"),
            400,
        ),
        (
            app.request(Method::POST, PATIENTS, Some(main)).header("content-type", "text/plain").body("hi"),
            415,
        ),
        (app.request(Method::POST, PATIENTS, Some(main)).json(&json!({})), 422),
        (app.request(Method::GET, &format!("{PATIENTS}?perPage=0"), Some(main)), 422),
        (app.http.post(app.url(LOGIN)).json(&json!({})), 422),
        (app.http.post(app.url(LOGIN)).header("content-type", "application/json").body("]"), 400),
    ];
    for (req, expected) in cases {
        let built = req.try_clone().unwrap().build().unwrap();
        let what = format!("{} {}", built.method(), built.url());
        let r = reply(req).await;
        assert_status(&r, expected);
        let content_type = r.header("content-type").unwrap_or_default();
        assert!(
            content_type.starts_with("application/json"),
            "{what}: not JSON ({content_type}): {}",
            r.text
        );
        let body = &r.body;
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: no message: {body}");
        let code = body["code"].as_str().unwrap_or_else(|| panic!("{what}: no code: {body}"));
        assert!(
            !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{what}: code {code:?} is not snake_case"
        );
    }
}

#[tokio::test]
async fn nul_bytes_in_search_and_filters_are_422_not_500() {
    let app = TestApp::spawn().await;
    let main = app.main_branch().await;
    for query in ["search=a%00b", "filters%5Bsex%5D=%00", "search=%01"] {
        let r = list_patients(&app, main, query).await;
        assert_status(&r, 422);
    }
    let r = reply(app.request(Method::GET, "/api/v1/patients/search?search=a%00", Some(main))).await;
    assert_invalid(&r, &["search"]);
}
